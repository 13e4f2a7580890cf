#!/usr/bin/env python3
"""Runs the services of a compose file in one podman pod, as `docker compose up` would run them,
for the machines where only podman runs containers and containers can share no network but the
host's (scripts/image.sh compose).

What of the compose file is honoured: the services of the default profile (none of `profiles`) and
of the profiles given (--profile), or the services named and what they depend on,
started in `depends_on` order, each waiting for its dependencies' conditions (`service_healthy`:
the service's compose `healthcheck` test run in it, or its image's HEALTHCHECK; `service_started`;
`service_completed_successfully`); `image`, or for a service with `build` the image built before
(--build-image); `environment`, `volumes` (bind mounts, paths relative to the compose file),
`entrypoint`, `command`. The containers share the host's network, and every service name resolves
to 127.0.0.1 in them, so the services reach each other by name as on a compose network and their
`ports` are the host's own (the host ports must be free). `restart` is not honoured.

Usage: compose-pod.py up FILE POD --build-image IMAGE [--engine-opt=OPT]... [--timeout S]
                         [--profile P]... [--service NAME]...
       compose-pod.py down POD
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import yaml


def log(msg):
    print(f"[compose-pod] {msg}", file=sys.stderr, flush=True)


def qualify(image):
    """A short image name as Docker resolves it (podman here enforces qualified names)."""
    first = image.split("/")[0]
    if "/" not in image:
        return f"docker.io/library/{image}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{image}"
    return image


def dependencies(service):
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    return {d: (c or {}).get("condition", "service_started") for d, c in deps.items()}


def start_order(services):
    order, seen = [], set()

    def visit(name, path):
        if name in seen:
            return
        if name in path:
            sys.exit(f"depends_on has a cycle through {name}")
        if name not in services:
            sys.exit(f"a service depends on `{name}`, which is not in the default profile")
        for dep in dependencies(services[name]):
            visit(dep, path + [name])
        seen.add(name)
        order.append(name)

    for name in services:
        visit(name, [])
    return order


def podman(*args, check=True, capture=True):
    r = subprocess.run(["podman", *args], capture_output=capture, text=True)
    if check and r.returncode != 0:
        sys.exit(f"podman {' '.join(args[:3])} ... failed: {r.stderr.strip()}")
    return r


def state(container):
    r = podman("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", container, check=False)
    status, _, code = r.stdout.strip().partition(" ")
    return status, int(code or 0)


def healthy(container, service):
    test = (service.get("healthcheck") or {}).get("test")
    if test:
        if isinstance(test, str):
            cmd = ["sh", "-c", test]
        elif test[0] == "CMD-SHELL":
            cmd = ["sh", "-c", test[1]]
        elif test[0] == "CMD":
            cmd = test[1:]
        else:
            sys.exit(f"healthcheck test {test!r} is not CMD or CMD-SHELL")
        return podman("exec", container, *cmd, check=False).returncode == 0
    return podman("healthcheck", "run", container, check=False).returncode == 0


def wait_for(pod, name, service, condition, deadline):
    container = f"{pod}-{name}"
    while time.monotonic() < deadline:
        status, code = state(container)
        if condition == "service_completed_successfully":
            if status == "exited":
                if code == 0:
                    return
                sys.exit(f"{name} exited with {code}:\n{podman('logs', container, check=False).stderr}")
        elif status in ("exited", "stopped"):
            logs = podman("logs", container, check=False)
            sys.exit(f"{name} stopped (exit {code}) before it was {condition}:\n{logs.stdout}{logs.stderr}")
        elif condition == "service_started" and status == "running":
            return
        elif condition == "service_healthy" and status == "running" and healthy(container, service):
            return
        time.sleep(1)
    sys.exit(f"{name} was not {condition} in time")


def up(args):
    here = os.path.dirname(os.path.abspath(args.file))
    with open(args.file) as f:
        compose = yaml.safe_load(f)
    active = set(args.profile)
    services = {n: s for n, s in compose["services"].items() if not s.get("profiles") or active & set(s["profiles"])}
    if args.service:
        # As `docker compose up NAME...`: those and what they depend on.
        wanted, todo = set(), list(args.service)
        while todo:
            n = todo.pop()
            if n not in services:
                sys.exit(f"no service `{n}` under the profiles {sorted(active)}")
            if n not in wanted:
                wanted.add(n)
                todo.extend(dependencies(services[n]))
        services = {n: s for n, s in services.items() if n in wanted}
    podman("pod", "rm", "-f", args.pod, check=False)
    hosts = [a for n in services for a in ("--add-host", f"{n}:127.0.0.1")]
    # No infra container: the containers share the host's network, not the pod's namespaces, and
    # an infra container would be started without the engine options this machine needs.
    podman("pod", "create", "--name", args.pod, "--infra=false")
    deadline = time.monotonic() + args.timeout
    started = time.monotonic()
    for name in start_order(services):
        s = services[name]
        for dep, condition in dependencies(s).items():
            wait_for(args.pod, dep, services[dep], condition, deadline)
        image = args.build_image if "build" in s else qualify(s["image"])
        run = ["run", "-d", "--pod", args.pod, "--name", f"{args.pod}-{name}", "--network", "host", *hosts, *args.engine_opt]
        env = s.get("environment") or {}
        items = env.items() if isinstance(env, dict) else (e.split("=", 1) for e in env)
        for k, v in items:
            run += ["-e", f"{k}={v}"]
        for v in s.get("volumes") or []:
            src, _, rest = v.partition(":")
            if src.startswith("."):
                src = os.path.normpath(os.path.join(here, src))
            run += ["-v", f"{src}:{rest}"]
        entrypoint = s.get("entrypoint")
        if entrypoint is not None:
            run += ["--entrypoint", entrypoint if isinstance(entrypoint, str) else json.dumps(entrypoint)]
        command = s.get("command") or []
        if isinstance(command, str):
            command = shlex.split(command)
        podman(*run, image, *command)
        log(f"{name}: started ({image}) {time.monotonic() - started:.1f} s after up")
    log(f"every service of {args.file} started in pod {args.pod}")


def down(args):
    podman("pod", "rm", "-f", args.pod, check=False)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("file")
    u.add_argument("pod")
    u.add_argument("--build-image", required=True)
    u.add_argument("--engine-opt", action="append", default=[])
    u.add_argument("--timeout", type=float, default=300)
    u.add_argument("--profile", action="append", default=[])
    u.add_argument("--service", action="append", default=[])
    d = sub.add_parser("down")
    d.add_argument("pod")
    args = p.parse_args()
    up(args) if args.cmd == "up" else down(args)


if __name__ == "__main__":
    main()
