"""Every command given a bad input: a non-zero exit (2 for usage and config errors), nothing
on stdout, no traceback, and one message on stderr naming what is wrong (issue 39, item 4),
in lines that fit 80 columns (issue 65, item 6).

In-process through typer's CliRunner, so the whole file takes seconds. No case may start a
run: the first step of `launch_training` and `resume_training` (after their checks) is
replaced by a stub that fails the test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollcli.cli.app import app

runner = CliRunner()

# (command line with @T for the fixture folder and @R for its runs folder, exit status,
#  text the one error line must hold)
CASES: list[tuple[str, int, str]] = [
    # train
    ("train nosuch-recipe", 2, "no recipe named 'nosuch-recipe'"),
    ("train rlvr train.lrr=1", 2, "unknown key 'train.lrr' (did you mean 'train.lr'?)"),
    ("train rlvr train.lr=abc", 2, "train.lr = 'abc'"),
    ("train rlvr notkeyvalue", 2, "override 'notkeyvalue' is not of the form key.path=value"),
    ("train rlvr --steps -1", 2, "train.steps = -1"),
    ("train rlvr --steps abc", 2, "Invalid value for '--steps'"),
    ("train", 2, "Missing argument 'recipe'"),
    ("train rlvr --bogus-flag", 2, "No such option: --bogus-flag"),
    ("train rlvr --resume sometimes", 2, "--resume 'sometimes': use --resume auto"),
    ("train rlvr --resume auto", 2, "give --run-id ID"),
    ("train rlvr --run-id a/b", 2, "run.run_id = 'a/b': not a plain folder name"),
    ("train rlvr --run-id ..", 2, "run.run_id = '..': not a plain folder name"),
    ("train rlvr --run-id my|run", 2, "e.g. 'my-run'"),
    ("train rlvr run.runs_dir=", 2, "run.runs_dir = ''"),
    ("train rlvr --gpus -1", 2, "resources.gpus = -1"),
    ("train rlvr algorithm.advantage=nosuch", 2, "algorithm.advantage = 'nosuch'"),
    ("train rlvr run.trackers=[jsonl,wandbb]", 2, "unknown tracker 'wandbb' (did you mean"),
    # the example in brackets is printed, not eaten as console markup
    ("train rlvr train.lora.target_modules=[]", 2, "e.g. [q_proj, v_proj], or all-linear"),
    ("train rlvr train.lora.target_modules=all", 2, "give a list of module names"),
    ("train @T/missing.yaml", 2, "recipe file '@T/missing.yaml' does not exist"),
    ("train @T/bad.yaml", 2, "line 2 is not valid YAML"),
    ("train @T/list.yaml", 2, "a recipe must be a YAML mapping of keys, got list"),
    ("train @T/nopipeline.yaml", 2, "pipeline is missing"),
    ("train rlvr --dry-run --model qwen-7b", 2, "qwen-7b"),
    # plan
    ("plan nosuch", 2, "no recipe named 'nosuch'"),
    ("plan rlvr --gpu-kind h100-80g --gpu-mem 80", 2, "give --gpu-kind or --gpu-mem, not both"),
    ("plan rlvr --gpu-kind nosuch", 2, "unknown GPU kind 'nosuch'"),
    ("plan rlvr --nodes 0", 2, "devices.nodes = 0"),
    ("plan rlvr --gpus 8 --nodes 3", 2, "8 GPUs do not split evenly over 3 nodes"),
    ("plan rlvr devices.actor_train.zero_stage=7", 2, "zero_stage = 7"),
    ("plan rlvr --model nosuch-xyz", 2, "unknown model 'nosuch-xyz'"),
    ("plan @T/bad.yaml", 2, "not valid YAML"),
    ("plan rlvr --gpus 8 --gpu-mem 0", 2, "--gpu-mem"),
    ("plan rlvr --gpus 8 --gpu-mem -5", 2, "--gpu-mem"),
    ("plan rlvr --gpus 8 --host-mem 0", 2, "devices.host_mem_gib = 0.0"),
    ("plan rlvr --gpus 200000", 2, "--gpus"),
    ("train rlvr --dry-run data.source=file data.train_path=@T/none.jsonl", 2, "none.jsonl"),
    ("train rlvr --dry-run data.train_path=@T/x.jsonl", 2, "x.jsonl' does not exist"),
    (
        "plan rlvr-mix data.mix.math.val_path=v.jsonl",
        2,
        "val_path applies to a dataset read from path",
    ),
    ("train webshop --dry-run agentic.shaping=progress", 2, "shaping"),
    # eval
    ("eval nosuch-env", 2, "no recipe named 'nosuch-env'"),
    ("eval sft", 2, "sft is a sft recipe; roll eval plays environments"),
    ("eval rlvr-math --model random", 2, "an rlvr recipe needs a model"),
    ("eval sokoban --model random --k 2", 2, "--k applies to rlvr recipes"),
    ("eval sokoban --model random --n 0", 2, "--n 0: evaluate at least one"),
    ("eval sokoban --model random --temperature 0.5", 2, "'random' has none"),
    ("eval sokoban --model nosuch-model-xyz", 2, "unknown model 'nosuch-model-xyz'"),
    # reward
    ("reward nosuch -i @T/ok.jsonl", 2, "reward.fn = 'nosuch' is neither a built-in"),
    ("reward nomod.sub:fn -i @T/ok.jsonl", 2, "cannot import 'nomod.sub'"),
    ("reward math", 2, "Missing option '--input'"),
    ("reward math -i @T/missing.jsonl", 2, "missing.jsonl' does not exist"),
    ("reward math -i @T", 2, "--input: cannot read @T, split train: not valid JSON"),
    ("reward math -i @T/badjson.jsonl", 2, "badjson.jsonl: not valid JSON at line 1"),
    ("reward math -i @T/noanswer.jsonl", 2, "noanswer.jsonl: row 1: missing field 'answer'"),
    ("reward math -i @T/listline.jsonl", 2, "row 1: missing field 'response'"),
    ("reward math -i @T/empty.jsonl", 2, "empty.jsonl has no rows"),
    ("reward math -i @T/ok.jsonl --option notkv", 2, "--option 'notkv' is not key=value"),
    ("reward math -i @T/ok.jsonl --option format_weight=abc", 2, "reward.format_weight = 'abc'"),
    ("reward math -i @T/ok.jsonl --option bogus=1", 2, "unknown key 'reward.options.bogus'"),
    ("reward math -i @T/ok.jsonl --timeout 0", 2, "--timeout 0: give a positive number"),
    # recipes
    ("recipes show nosuch", 2, "no recipe named 'nosuch'"),
    ("recipes cp nosuch @T/x.yaml", 2, "no recipe named 'nosuch'"),
    ("recipes cp rlvr @T/nopipeline.yaml", 2, "already exists (pass --force to overwrite)"),
    ("recipes cp rlvr-math @T/dir/missing/x.yaml", 2, "folder @T/dir/missing does not exist"),
    ("recipes cp rlvr-math @T/ok.jsonl/x.yaml", 2, "@T/ok.jsonl is a file, not a folder"),
    ("recipes nosuchsub", 2, "No such command 'nosuchsub'"),
    # runs
    ("runs ls --runs-dir @T/typo", 2, "runs folder @T/typo does not exist"),
    ("runs ls --runs-dir @T/ok.jsonl", 2, "is a file, not a folder"),
    ("runs show nosuch --runs-dir @R", 2, "no run 'nosuch' in @R"),
    ("runs show r1x --runs-dir @R", 2, "did you mean 'r1'?"),
    ("runs show", 2, "Missing argument 'run_id'"),
    ("runs scan r1 --runs-dir @R", 2, "run r1 saved no samples"),
    ("runs scan r1 --many 0 --runs-dir @R", 2, "Invalid value for '--many'"),
    # logs, plot, export
    ("logs nosuch --runs-dir @R", 2, "no run 'nosuch'"),
    ("logs r1 --runs-dir @T/typo", 2, "runs folder @T/typo does not exist"),
    ("logs r1 -n -1 --runs-dir @R", 2, "Invalid value for '-n' / '--lines'"),
    ("logs r1 extra --runs-dir @R", 2, "unexpected extra argument"),
    ("plot nosuch --runs-dir @R", 2, "no run 'nosuch'"),
    ("plot empty --runs-dir @R", 2, "run empty has no metrics yet"),
    ("plot r1 -o @T/x.txt --runs-dir @R", 2, "is not a .png file"),
    ("export r1 @T/out --best --step 1 --runs-dir @R", 2, "--best and --step both pick"),
    ("export r1 @T/out --runs-dir @R", 2, "no complete checkpoint"),
    ("export nosuch @T/out --runs-dir @R", 2, "no run 'nosuch'"),
    # resume
    ("resume nosuch --runs-dir @R", 2, "no run 'nosuch'"),
    ("resume r1 --runs-dir @T/typo", 2, "runs folder @T/typo does not exist"),
    ("resume r1 model=other --runs-dir @R", 2, "model cannot change when a run resumes"),
    ("resume r1 train.lrr=1 --runs-dir @R", 2, "unknown key 'train.lrr'"),
    # data
    ("data episodes sokoban --policy bogus -o @T/x.jsonl", 2, "--policy 'bogus': choose one"),
    ("data episodes rlvr-math -o @T/x.jsonl", 2, "rlvr-math is a rlvr recipe"),
    ("data episodes sokoban --n 0 -o @T/x.jsonl", 2, "Invalid value for '--n'"),
    ("data episodes sokoban", 2, "Missing option '--out'"),
    ("data episodes nosuch-env -o @T/x.jsonl", 2, "no recipe named 'nosuch-env'"),
    ("data sft-from-run nosuch @T/o.jsonl --runs-dir @R", 2, "no run 'nosuch'"),
    ("data sft-from-run r1 @T --runs-dir @R", 2, "is a folder, not a file"),
    ("data sft-from-run r1 @T/o.jsonl --runs-dir @R", 2, "run 'r1' has no samples"),
    ("data dpo-from-run r1 @T/o.jsonl --per-prompt 0 --runs-dir @R", 2, "'--per-prompt'"),
    # doctor, and the command line itself
    ("doctor nosuch-recipe", 2, "no recipe named 'nosuch-recipe'"),
    ("doctor rlvr train.lrr=1", 2, "unknown key 'train.lrr'"),
    ("doctor rlvr --gpus -1", 2, "resources.gpus = -1"),
    ("nosuchcommand", 2, "No such command 'nosuchcommand'"),
    ("--bogus-flag", 2, "No such option: --bogus-flag"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Input files and a runs folder: `r1` (a finished run with metrics, no samples, no
    checkpoint) and `empty` (no metrics)."""
    from rollcli.runs.run_dir import RunDir

    root = tmp_path_factory.mktemp("bad")
    run = RunDir.create(root / "runs", "r1", "name: rlvr-math\npipeline: rlvr\n")
    run.write_status("finished", recipe="rlvr-math", model="m", total_steps=2, step=2)
    (run.root / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/mean": 0.5}) + "\n")
    RunDir.create(root / "runs", "empty", "name: rlvr-math\npipeline: rlvr\n")
    files = {
        "nopipeline.yaml": "name: mine\n",
        "bad.yaml": "a: [1\n",
        "list.yaml": "- 1\n- 2\n",
        "badjson.jsonl": "{nope\n",
        "noanswer.jsonl": '{"response": "4"}\n',
        "listline.jsonl": "[1, 2]\n",
        "empty.jsonl": "",
        "ok.jsonl": '{"response": "2 + 2 = 4", "answer": 4}\n',
    }
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.fixture(autouse=True)
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad input that got through would start Ray and train: fail instead."""
    import rollcli.launch.launch as launch

    def started(*args: object, **kwargs: object) -> None:
        pytest.fail("a bad input started a run")

    monkeypatch.setattr(launch, "_prepare_model", started)  # the first step of every start


def _argv(line: str, world: Path) -> list[str]:
    # `|` stands for a space inside one argument
    return [
        a.replace("@R", str(world / "runs")).replace("@T", str(world)).replace("|", " ")
        for a in line.split()
    ]


@pytest.mark.parametrize(("line", "code", "says"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_is_one_line_and_a_non_zero_exit(
    line: str, code: int, says: str, world: Path
) -> None:
    result = runner.invoke(app, _argv(line, world), env={"COLUMNS": "80"})
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    # one message: a line, or wrapped at 80 columns with its continuation lines indented
    assert lines[0].startswith("error: "), result.stderr
    assert all(x.startswith("  ") for x in lines[1:]), result.stderr
    assert all(len(x) <= 80 for x in lines), result.stderr
    message = " ".join(x.strip() for x in lines)
    assert says.replace("@R", str(world / "runs")).replace("@T", str(world)) in message


def test_there_are_at_least_40_cases_across_every_command() -> None:
    commands = {line.split()[0] for line, _, _ in CASES}
    assert len(CASES) >= 40
    for command in ("train", "plan", "eval", "reward", "recipes", "runs", "logs", "plot"):
        assert command in commands
    assert {"export", "resume", "data", "doctor"} <= commands


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("boom: e.g. [q_proj] stays")


def test_an_unexpected_error_is_one_line_with_a_debug_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ROLL_DEBUG", raising=False)
    monkeypatch.setattr("rollcli.config.catalogue.find_recipe", _boom)
    result = runner.invoke(app, ["recipes", "show", "rlvr"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert all(x.startswith("  ") and len(x) <= 80 for x in lines[1:]), result.stderr
    assert lines[0].startswith("error: RuntimeError: boom: e.g. [q_proj] stays")
    assert "`roll --debug ...` or ROLL_DEBUG=1 shows" in " ".join(result.stderr.split())


def test_an_error_from_a_ray_worker_names_its_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    class TaskError(Exception):  # what a Ray task error carries: `cause`
        def __init__(self) -> None:
            super().__init__("ray::Worker.step() (pid=1, ip=1.2.3.4)\n  File ...")
            self.cause = ZeroDivisionError("division by zero")

    def fails(*args: object, **kwargs: object) -> None:
        raise TaskError

    monkeypatch.delenv("ROLL_DEBUG", raising=False)
    monkeypatch.setattr("rollcli.config.catalogue.find_recipe", fails)
    result = runner.invoke(app, ["recipes", "show", "rlvr"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ZeroDivisionError: division by zero (")


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--debug", "recipes", "show", "rlvr"], {}),
        (["recipes", "show", "rlvr"], {"ROLL_DEBUG": "1"}),
        (["--debug", "train", "rlvr", "--dry-run"], {}),  # a command with its own --debug
    ],
)
def test_debug_lets_the_traceback_through(
    argv: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rollcli.config.catalogue.find_recipe", _boom)
    monkeypatch.setattr("rollcli.config.loader.load_recipe", _boom)
    result = runner.invoke(app, argv, env=env)
    assert isinstance(result.exception, RuntimeError)
    # and the flag does not stick to the next command
    again = runner.invoke(app, ["recipes", "show", "rlvr"])
    assert again.exit_code == 1 and not isinstance(again.exception, RuntimeError)


def test_ctrl_c_is_one_word_and_exit_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("rollcli.config.catalogue.find_recipe", interrupted)
    result = runner.invoke(app, ["recipes", "show", "rlvr"])
    assert result.exit_code == 130 and result.stderr.strip() == "interrupted"


def test_trackers_without_jsonl_are_accepted_and_jsonl_kept() -> None:
    result = runner.invoke(app, ["train", "rlvr", "run.trackers=[tensorboard]", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert "  trackers:\n  - jsonl\n  - tensorboard\n" in result.stdout


def test_doctor_prints_install_lines_with_their_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pip install "roll-rl[swanlab]"` lost its `[swanlab]` to console markup."""
    monkeypatch.setattr("rollcli.config.trackers.is_installed", lambda name: name != "swanlab")
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert 'pip install "roll-rl[swanlab]"' in result.stdout


def test_runs_ls_without_the_default_folder_is_no_runs_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["runs", "ls"])
    assert result.exit_code == 0 and "no runs yet" in result.stderr


def test_quick_refusals_import_no_torch_or_ray(tmp_path: Path) -> None:
    """`roll data episodes --policy bogus` and `roll runs ls --runs-dir <typo>` answer
    before the heavy imports (--policy bogus took 13.7 s)."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from rollcli.cli.app import app\n"
        "r = CliRunner()\n"
        f"out = {str(tmp_path / 'x.jsonl')!r}\n"
        "a = r.invoke(app, ['data', 'episodes', 'sokoban', '--policy', 'bogus', '-o', out])\n"
        "b = r.invoke(app, ['runs', 'ls', '--runs-dir', out + '.typo'])\n"
        "assert (a.exit_code, b.exit_code) == (2, 2), (a.output, b.output)\n"
        "print(sorted(m for m in ('torch', 'ray', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
