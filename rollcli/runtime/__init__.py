"""What a running pipeline stands on: its workers built from the plan (`workers_setup`,
`role_args`), the run's controls (`run_control`: stop rules, faults, restarts), its
checkpoints (`checkpointer`) and its log (`run_log`), and what it tells the display
(`display_protocol`). The run's files on disk are `runs/`; the pipelines are `pipelines/`."""
