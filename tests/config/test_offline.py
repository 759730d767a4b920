"""`make lab`'s first steps (offline/): what is missing is set up or named at once, the image
choice says why it was made, and a failed choice stops the lab. Docker itself is faked here: a
`docker` script on PATH that logs its calls and answers as each test says."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.config.queries import REPO

OFFLINE = REPO / "offline"
NO_ENGINE = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
NO_REGISTRY = 'Error response from daemon: Get "https://registry-1.docker.io/v2/": no such host'
# `docker` as each test needs it: `info` answers, or prints $FAKE_INFO_ERROR until a (fake)
# dockerd has created the file $FAKE_ENGINE; `pull` and
# `image inspect` of upstream images fail (the stand-ins, or those matching $FAKE_PRESENT, are
# "present"); `ps` prints $FAKE_PS; `compose config` is the real plugin, other compose calls
# and `build` succeed; every call is logged to $FAKE_LOG, and the compose files of each
# `compose up` to $FAKE_LOG.files.
FAKE_DOCKER = """#!/usr/bin/env bash
echo "$*" >>"$FAKE_LOG"
[[ "$1 ${2:-}" == "compose up" ]] && echo "${COMPOSE_FILE:-}" >>"$FAKE_LOG.files"
case "$1 ${2:-}" in
    "info "*) [[ -z "${FAKE_INFO_ERROR:-}" || -e "${FAKE_ENGINE:-/nonexistent}" ]] \
        || { echo "$FAKE_INFO_ERROR" >&2; exit 1; } ;;
    "pull "*) echo "$FAKE_PULL_ERROR" >&2; exit 1 ;;
    "ps "*) printf '%b' "${FAKE_PS:-}" ;;
    "image inspect") [[ "$3" == ${FAKE_PRESENT:-wirelab/*} ]] ;;
    "compose "*) [[ " $* " == *" config "* ]] && exec "$REAL_DOCKER" "$@"; exit 0 ;;
esac
"""


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, str]:
    """Environment whose PATH has only the fake docker and the system's /usr/bin and /bin (no
    dockerd, which Debian keeps in /usr/sbin)."""
    real = shutil.which("docker")
    if real is None:
        pytest.fail("the docker CLI with the compose v2 plugin is needed (no engine is)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("WIRELAB_")},
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "REAL_DOCKER": real,
        "FAKE_LOG": str(tmp_path / "docker.log"),
        "FAKE_PULL_ERROR": NO_REGISTRY,
    }


def add_command(env: dict[str, str], name: str, script: str) -> None:
    path = Path(env["PATH"].split(":")[0]) / name
    path.write_text(f"#!/usr/bin/env bash\n{script}\n")
    path.chmod(0o755)


def as_user(env: dict[str, str], uid: int = 1000) -> None:
    """`id` says ``uid``, so the scripts take the path of a user without root (or of root)."""
    add_command(env, "id", f'case "${{1:-}}" in -un) echo ann ;; *) echo {uid} ;; esac')


def run(
    env: dict[str, str], script: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """offline/<script> with ``args``; also how long it took."""
    start = time.monotonic()
    done = subprocess.run(
        [str(OFFLINE / script), *args], env=env, cwd=REPO, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    return done, time.monotonic() - start


def docker_calls(env: dict[str, str]) -> list[str]:
    log = Path(env["FAKE_LOG"])
    return log.read_text().splitlines() if log.exists() else []


def test_lab_up_stops_when_the_image_choice_fails(fake: dict[str, str]) -> None:
    """Guards against: with WIRELAB_OFFLINE=bogus, lab-up went on to `compose up` (pulling)."""
    done, _ = run({**fake, "WIRELAB_OFFLINE": "bogus"}, "lab-up")
    assert done.returncode == 2, done.stderr
    assert "WIRELAB_OFFLINE must be 0, 1 or unset, not 'bogus'" in done.stderr
    assert set(docker_calls(fake)) <= {"info", "compose version"}, docker_calls(fake)


def test_without_an_engine_the_choice_says_so_and_pulls_nothing(fake: dict[str, str]) -> None:
    """Guards against: it bootstrapped a root file system for 40 s and blamed the registry."""
    done, seconds = run({**fake, "FAKE_INFO_ERROR": NO_ENGINE}, "env")
    assert done.returncode == 1
    assert "offline: no engine answers" in done.stderr and NO_ENGINE in done.stderr
    assert "registry" not in done.stderr
    assert docker_calls(fake) == ["info"]
    assert seconds < 1


def test_without_a_registry_the_choice_names_the_registry(fake: dict[str, str]) -> None:
    done, _ = run(fake, "env")
    assert done.returncode == 0, done.stderr
    assert "WIRELAB_OFFLINE=1" in done.stdout.splitlines()
    assert "offline stand-ins: no registry answers (prom/prometheus:" in done.stderr
    assert NO_REGISTRY in done.stderr
    assert any(c.startswith("pull ") for c in docker_calls(fake))


# offline/go-build's components and the binaries each leaves in its folder.
GO_BUILT = {
    "prometheus": ("prometheus", "promtool"),
    "node-exporter": ("node_exporter",),
    "cadvisor": ("cadvisor",),
    "toxiproxy": ("toxiproxy", "toxiproxy-cli"),
    "jaeger": ("jaeger",),
}


def go_builds_done(fake: dict[str, str], tmp_path: Path) -> dict[str, Path]:
    """The Go builds "done" in a cache of the test's own: each component's folder (offline/go-build
    --where) holds its binaries, so no Go is run."""
    fake["WIRELAB_GO_BUILD_CACHE"] = str(tmp_path / "go-build")
    folders = {}
    for component, binaries in GO_BUILT.items():
        where = subprocess.run(
            [str(OFFLINE / "go-build"), "--where", component], env=fake,
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        folders[component] = Path(where)
        folders[component].mkdir(parents=True)
        for binary in binaries:
            (folders[component] / binary).touch(mode=0o755)
    return folders


def _stand_ins() -> dict[str, str]:
    lines = (OFFLINE / "stand-ins.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if re.match(r"[A-Z_]+=", line))


def test_every_image_the_lab_and_its_topologies_pin_has_a_stand_in(fake: dict[str, str]) -> None:
    """A topology's new image (nginx for the cluster) must run offline too; Grafana alone has no
    Debian package and is left out offline (offline/env)."""
    files = [REPO / "compose.yaml", *sorted((REPO / "topologies").glob("*.yaml"))]
    pinned = {v for f in files for v in re.findall(r"\$\{(\w+_IMAGE):-", f.read_text())}
    assert "NGINX_IMAGE" in pinned
    assert pinned - {"GRAFANA_IMAGE"} <= set(_stand_ins()), pinned - set(_stand_ins())
    done, _ = run({**fake, "WIRELAB_OFFLINE": "1"}, "env")
    assert done.returncode == 0, done.stderr
    chosen = set(done.stdout.splitlines())
    assert {f"{k}={v}" for k, v in _stand_ins().items()} <= chosen, done.stdout


def test_build_images_builds_every_stand_in_from_its_dockerfile(
    fake: dict[str, str], tmp_path: Path
) -> None:
    """Only the python base is "present": every other stand-in is built, on that base, from a
    Dockerfile that exists; a Go-built one from its build folder, tagged with that folder too."""
    stand_ins = _stand_ins()
    folders = go_builds_done(fake, tmp_path)
    done, _ = run({**fake, "FAKE_PRESENT": stand_ins["PYTHON_IMAGE"]}, "build-images")
    assert done.returncode == 0, done.stderr
    builds = {}
    for call in docker_calls(fake):
        if call.startswith("build "):
            args = call.split()
            builds[args[args.index("-t") + 1]] = args
    wanted = {tag for key, tag in stand_ins.items() if key.endswith("_IMAGE")} - {
        stand_ins["PYTHON_IMAGE"]
    }
    assert set(builds) == wanted, docker_calls(fake)
    contexts = {builds[stand_ins[f"{c.upper().replace('-', '_')}_IMAGE"]][-1] for c in GO_BUILT}
    assert contexts == {str(f) for f in folders.values()}
    for args in builds.values():
        assert f"BASE={stand_ins['PYTHON_IMAGE']}" in args
        assert Path(args[args.index("-f") + 1]).is_file(), args


def test_build_images_builds_only_the_stand_ins_asked_for(
    fake: dict[str, str], tmp_path: Path
) -> None:
    """offline/env asks for what the chosen topology and profiles run: a one-hop lab builds no
    nginx, Node.js, RabbitMQ or Toxiproxy stand-in."""
    stand_ins = _stand_ins()
    go_builds_done(fake, tmp_path)
    done, _ = run(
        {**fake, "FAKE_PRESENT": stand_ins["PYTHON_IMAGE"], "WIRELAB_OFFLINE": "1"}, "env"
    )
    assert done.returncode == 0, done.stderr
    built = {
        c.split()[c.split().index("-t") + 1] for c in docker_calls(fake) if c.startswith("build ")
    }
    for key in ("PROMETHEUS_IMAGE", "CADVISOR_IMAGE", "NODE_EXPORTER_IMAGE"):
        assert stand_ins[key] in built, docker_calls(fake)
    for key in ("NGINX_IMAGE", "NODE_IMAGE", "RABBITMQ_IMAGE", "TOXIPROXY_IMAGE", "JAEGER_IMAGE"):
        assert stand_ins[key] not in built, docker_calls(fake)


def test_each_stand_in_built_from_source_carries_composes_pinned_release() -> None:
    """The lab CI boots is the lab users pull: Prometheus, node-exporter, Toxiproxy and Jaeger at
    the pinned release, cAdvisor's library at it (behind a main of ours: offline/src/cadvisor)."""
    compose = (REPO / "compose.yaml").read_text()
    stand_ins = _stand_ins()
    for key, image in (
        ("PROMETHEUS_IMAGE", "prom/prometheus"),
        ("NODE_EXPORTER_IMAGE", "prom/node-exporter"),
        ("TOXIPROXY_IMAGE", "ghcr.io/shopify/toxiproxy"),
        ("JAEGER_IMAGE", "jaegertracing/jaeger"),
    ):
        pinned = re.search(rf"{re.escape(image)}:(v?[0-9.]+)\}}", compose)
        assert pinned, image
        assert stand_ins[key].endswith(f":{pinned.group(1)}"), (key, stand_ins[key])
    cadvisor = re.search(r"cadvisor:(v[0-9.]+)\}", compose)
    assert cadvisor
    assert stand_ins["CADVISOR_IMAGE"].startswith(f"wirelab/cadvisor:{cadvisor.group(1)}-")
    library = (OFFLINE / "src" / "cadvisor" / "go.mod").read_text()
    pin = rf"^replace github.com/google/cadvisor/lib => \S+ {re.escape(cadvisor.group(1))}$"
    assert re.search(pin, library, re.M), library


def test_the_nginx_stand_in_runs_nginx_in_the_foreground_without_root() -> None:
    """As the official image runs it (CMD `nginx -g "daemon off;"`, graceful SIGQUIT), so
    compose sees nginx's own exit; as www-data, which topologies/nginx.conf allows."""
    lines = (OFFLINE / "nginx.Dockerfile").read_text().splitlines()
    assert 'CMD ["nginx", "-g", "daemon off;"]' in lines
    assert "STOPSIGNAL SIGQUIT" in lines
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in {"root", "0"}, users


def test_a_forced_choice_names_its_knob(fake: dict[str, str]) -> None:
    done, _ = run({**fake, "WIRELAB_OFFLINE": "0"}, "env")
    assert done.returncode == 0, done.stderr
    assert "offline: the pinned images: WIRELAB_OFFLINE=0" in done.stderr
    assert not any(c.startswith("pull ") for c in docker_calls(fake))


@pytest.mark.parametrize(
    ("dockerd", "info_error", "wanted"),
    [
        (False, NO_ENGINE, "no Docker engine answers and Docker is not installed"),
        (True, NO_ENGINE, "no Docker engine answers;"),
        (True, "permission denied while trying to connect to the Docker daemon socket",
         "`sudo usermod -aG docker ann` and a new login"),
    ],
)  # fmt: skip
def test_without_root_make_lab_names_what_is_missing_within_a_second(
    fake: dict[str, str], dockerd: bool, info_error: str, wanted: str
) -> None:
    """Guards against: `unknown shorthand flag: 'f' in -f`, or 40 s before the cause came out."""
    as_user(fake)
    if dockerd:
        add_command(fake, "dockerd", "exit 1")
    done, seconds = run({**fake, "FAKE_INFO_ERROR": info_error}, "lab-up")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and wanted in lines[0], done.stderr
    assert "usermod" in wanted or f"`sudo {OFFLINE}/docker-ready` sets it up" in lines[0]
    assert docker_calls(fake) == ["info"]
    assert seconds < 1


def test_apt_need_names_the_packages_and_the_command_without_root(fake: dict[str, str]) -> None:
    as_user(fake)
    done, _ = run(fake, "apt-need", "docker:docker.io", "wirelab-absent:wirelab-pkg", "bash")
    assert done.returncode == 1
    wanted = "missing wirelab-absent: install with `sudo apt-get install -y wirelab-pkg`"
    assert done.stderr == wanted + "\n"


def test_the_compose_plugin_is_the_go_binary_not_pips_wrapper(
    fake: dict[str, str], tmp_path: Path
) -> None:
    """A plugin that always exits 0 would let a failed `up --wait` look green."""
    config = tmp_path / "docker-config"
    (config / "cli-plugins").mkdir(parents=True)
    (config / "cli-plugins" / "docker-compose").write_text("#!/usr/bin/python3\n")
    done, _ = run({**fake, "DOCKER_CONFIG": str(config)}, "compose-plugin")
    assert done.returncode == 0, done.stderr
    plugin = config / "cli-plugins" / "docker-compose"
    assert plugin.read_bytes()[:4] == b"\x7fELF"
    check = subprocess.run([str(plugin), "version"], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0 and "Docker Compose version" in check.stdout


def test_as_root_make_lab_installs_docker_and_starts_its_engine(
    fake: dict[str, str], tmp_path: Path
) -> None:
    """apt-get installs docker.io (here: a dockerd that marks the engine up, then sleeps) and
    offline/dockerd-up starts it, as the e2e test does; its pid is printed."""
    as_user(fake, uid=0)
    package = tmp_path / "dockerd"
    package.write_text('#!/usr/bin/env bash\ntouch "$FAKE_ENGINE"\nexec sleep 60\n')
    package.chmod(0o755)
    bin_dir = fake["PATH"].split(":")[0]
    add_command(fake, "apt-get", f'echo "apt-get $*" >>"$FAKE_LOG"; cp {package} {bin_dir}/')
    env = {**fake, "FAKE_INFO_ERROR": NO_ENGINE, "FAKE_ENGINE": str(tmp_path / "engine"),
           "WIRELAB_DOCKERD_LOG": str(tmp_path / "dockerd.log")}  # fmt: skip
    done, _ = run(env, "docker-ready")
    pids = re.findall(r"started dockerd, pid (\d+)", done.stderr)
    try:
        assert done.returncode == 0, done.stderr
        assert "apt-get install -y -q --no-install-recommends docker.io" in docker_calls(fake)
        assert len(pids) == 1, done.stderr
        assert Path(f"/proc/{pids[0]}/cmdline").read_bytes().startswith(b"sleep\0")
    finally:
        for pid in pids:
            os.kill(int(pid), signal.SIGTERM)


def test_the_offline_base_image_installs_debootstrap_when_missing(
    fake: dict[str, str], tmp_path: Path
) -> None:
    """Only the offline path needs debootstrap: `make lab` installs it there, as `make test` does
    (here apt-get brings one that fails, so nothing is built)."""
    as_user(fake, uid=0)
    package = tmp_path / "debootstrap"
    package.write_text("#!/usr/bin/env bash\necho 'fake debootstrap: no mirror'\nexit 1\n")
    package.chmod(0o755)
    bin_dir = fake["PATH"].split(":")[0]
    add_command(fake, "apt-get", f'echo "apt-get $*" >>"$FAKE_LOG"; cp {package} {bin_dir}/')
    done, _ = run(fake, "build-python-base", "wirelab-test/absent:tag")
    assert done.returncode == 1
    assert "apt-get install -y -q --no-install-recommends debootstrap" in docker_calls(fake)
    assert "fake debootstrap: no mirror" in done.stderr


@pytest.mark.parametrize(
    ("profiles", "node_services"), [(None, False), ("node", True), (" node ", True)]
)
def test_make_lab_starts_the_node_services_only_with_their_profile(
    fake: dict[str, str], profiles: str | None, node_services: bool
) -> None:
    """`make lab` is the one-hop Python lab; `make lab PROFILES=node` adds rest-node, grpc-node."""
    env = {**fake, "WIRELAB_OFFLINE": "1"}
    if profiles is not None:
        env["WIRELAB_PROFILES"] = profiles
    done, _ = run(env, "lab-up")
    assert done.returncode == 0, done.stderr
    (up,) = [c.split() for c in docker_calls(fake) if c.startswith("compose up ")]
    assert {"rest", "grpc", "prometheus"} <= set(up), up
    assert ({"rest-node", "grpc-node"} <= set(up)) is node_services, up
    assert "bench" not in up


def test_make_lab_leaves_out_every_service_wirelab_exclude_names(fake: dict[str, str]) -> None:
    """WIRELAB_EXCLUDE="locust locust-worker" stopped `make lab` with `locust-worker: command not
    found`: the image choice's lines were sourced, so a value with a space ran as a command."""
    env = {**fake, "WIRELAB_OFFLINE": "1", "WIRELAB_EXCLUDE": "locust locust-worker jupyter"}
    done, _ = run(env, "lab-up")
    assert done.returncode == 0, done.stderr
    (up,) = [c.split() for c in docker_calls(fake) if c.startswith("compose up ")]
    assert {"rest", "grpc", "prometheus"} <= set(up), up
    # Offline, Grafana (no package to stand in for it) stays out too.
    assert not {"locust", "locust-worker", "jupyter", "grafana"} & set(up), up


def test_make_lab_removes_the_previous_labs_containers_this_one_does_not_run(
    fake: dict[str, str],
) -> None:
    """`make lab TOPOLOGY=cluster` after the order chain with PROFILES=amqp left the chain's
    containers and the broker running beside the cluster, sharing the machine with the next
    benchmark; now they go first, in one line, and the services the new lab runs stay."""
    running = {
        "rest": "wirelab-rest-1",
        "rest-b": "wirelab-rest-b-1",
        "rabbitmq": "wirelab-rabbitmq-1",
        "locust-worker": "wirelab-locust-worker-2",
    }
    env = {**fake, "WIRELAB_OFFLINE": "1"}
    env["FAKE_PS"] = "".join(f"{service} {name}\\n" for service, name in running.items())
    done, _ = run(env, "lab-up")
    assert done.returncode == 0, done.stderr
    assert "rm -f wirelab-rest-b-1 wirelab-rabbitmq-1" in docker_calls(fake), docker_calls(fake)
    assert (
        "lab: removing the previous lab's containers this one does not run: "
        "wirelab-rest-b-1 wirelab-rabbitmq-1"
    ) in done.stderr
    assert "label=com.docker.compose.project=wirelab" in " ".join(docker_calls(fake))


@pytest.mark.parametrize(
    ("topology", "profiles", "files"),
    [
        ("a-to-b", "netem", "compose.yaml:topologies/a-to-b.yaml:topologies/netem/a-to-b.yaml"),
        ("order-chain", "node,netem", "compose.yaml:topologies/order-chain.yaml"
         ":topologies/netem/order-chain.yaml"),
        ("a-to-b", "node", "compose.yaml:topologies/a-to-b.yaml"),
        # The cluster's overlay proxies the edges' hop to lb (docs/network.md).
        ("cluster", "netem", "compose.yaml:topologies/cluster.yaml:topologies/netem/cluster.yaml"),
        ("cluster", "node", "compose.yaml:topologies/cluster.yaml"),
        ("one-hop", "netem", ""),
    ],
)  # fmt: skip
def test_with_netem_a_topologys_hops_go_through_toxiproxy(
    fake: dict[str, str], topology: str, profiles: str, files: str
) -> None:
    env = {**fake, "WIRELAB_OFFLINE": "1", "WIRELAB_TOPOLOGY": topology}
    done, _ = run({**env, "WIRELAB_PROFILES": profiles}, "lab-up")
    assert done.returncode == 0, done.stderr
    assert Path(fake["FAKE_LOG"] + ".files").read_text().splitlines() == [files]


@pytest.mark.parametrize(
    ("knobs", "refused"),
    [
        # The client-side balancing arm dials the replicas, past Toxiproxy.
        ({"WIRELAB_CLUSTER_GRPC_DOWNSTREAM": "grpc://grpc-b:50051"}, "grpc -> grpc://grpc-b:50051"),
        # ... or through the replicas' own proxies, but one of them past it.
        ({"WIRELAB_CLUSTER_GRPC_DOWNSTREAM": "grpc://toxiproxy:50201+grpc-b:50051#grpc-b"},
         "grpc -> grpc://toxiproxy:50201+grpc-b:50051#grpc-b"),
        # ... each through its own proxy (topologies/netem/cluster.yaml).
        ({"WIRELAB_CLUSTER_GRPC_DOWNSTREAM":
          "grpc://toxiproxy:50201+toxiproxy:50202+toxiproxy:50203#grpc-b"}, None),
        # The split over lb, once per piece, straight to nginx.
        ({"WIRELAB_CLUSTER_REST_DOWNSTREAM": "http://lb:8000,http://lb:8000"},
         "rest -> http://lb:8000"),
        # The same split through the hop's proxy pays the profile on every piece.
        ({"WIRELAB_CLUSTER_REST_DOWNSTREAM": "http://toxiproxy:8101#lb,http://toxiproxy:8101#lb"},
         None),
        # A broker's address past it too (the AMQP arm's hops go through amqp-broker).
        ({"WIRELAB_CLUSTER_GRPC_DOWNSTREAM": "amqp://rabbitmq:5672/orders"},
         "grpc -> amqp://rabbitmq:5672/orders"),
        ({}, None),
    ],
)  # fmt: skip
def test_with_netem_no_hop_bypasses_toxiproxy(
    fake: dict[str, str], knobs: dict[str, str], refused: str | None
) -> None:
    """A downstream set past Toxiproxy would pay no network profile while the other arm's hops
    pay it: `make lab` refuses it under netem, naming the edge and the address."""
    env = {**fake, "WIRELAB_OFFLINE": "1", "WIRELAB_TOPOLOGY": "cluster", **knobs}
    done, _ = run({**env, "WIRELAB_PROFILES": "netem"}, "lab-up")
    up = [c for c in docker_calls(fake) if c.startswith("compose up ")]
    if refused is None:
        assert done.returncode == 0, done.stderr
        assert up
    else:
        assert done.returncode == 2, done.stderr
        assert refused in done.stderr and "bypass it and pay none" in done.stderr
        assert not up
        # Without netem nothing is proxied, every arm alike: the same knob starts the lab.
        done, _ = run({**env, "FAKE_LOG": fake["FAKE_LOG"] + ".2"}, "lab-up")
        assert done.returncode == 0, done.stderr


def test_with_netem_the_order_chains_amqp_arm_starts_through_toxiproxy(
    fake: dict[str, str],
) -> None:
    """Its order service reaches RabbitMQ through amqp-broker (topologies/netem/order-chain.yaml),
    so the bypass check, which covers amqp:// downstreams, lets the lab start."""
    env = {**fake, "WIRELAB_OFFLINE": "1", "WIRELAB_TOPOLOGY": "order-chain"}
    done, _ = run({**env, "WIRELAB_PROFILES": "amqp,netem"}, "lab-up")
    assert done.returncode == 0, done.stderr
    assert any(c.startswith("compose up ") and " amqp " in f"{c} " for c in docker_calls(fake))


def _volumes(env: dict[str, str]) -> dict[str, str]:
    """compose's volume key -> the engine's volume name, with the amqp profile on."""
    done = subprocess.run(
        [str(OFFLINE / "compose"), "-p", "wirelab", "config", "--format", "json"],
        env={**env, "COMPOSE_PROFILES": "amqp", "COMPOSE_FILE": "compose.yaml"},
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {k: v["name"] for k, v in json.loads(done.stdout)["volumes"].items()}


def test_switching_flavours_keeps_each_releases_data_apart(fake: dict[str, str]) -> None:
    """Both ways: the pinned RabbitMQ 4.2 and Debian's 3.10 stand-in each get the data volume of
    their own release series, so neither opens (and neither refuses, nor damages) the other's;
    Prometheus is the same release in both flavours (test above), so it keeps one volume."""
    upstream = _volumes(fake)
    offline = _volumes({**fake, **_stand_ins()})
    assert upstream["rabbitmq-data"] == "wirelab_rabbitmq-data-4.2"
    assert offline["rabbitmq-data"] == "wirelab_rabbitmq-data-3.10"
    assert upstream["prometheus-data"] == offline["prometheus-data"] == "wirelab_prometheus-data"
    assert re.search(r"rabbitmq:4\.2\.\d+-management", (REPO / "compose.yaml").read_text())
