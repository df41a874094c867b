"""Starting a run, between the CLI and the pipelines: the pre-launch checks (`prelaunch`,
`gpu_support`), the run folder, the Ray session and the pipeline's class (`registry`), the
warm-up sub-run (`warmup`) and the one driver loop of every pipeline (`driver`)."""
