#!/usr/bin/env python3
"""The Connect worker's overhead against `pgoutbox run`: six outbox connectors, hosted either as six
`pgoutbox run` processes or as one `pgoutbox connect` worker, on throwaway PostgreSQL and tansu.

For each way of hosting them it prints
- idle: CPU seconds and summed peak RSS over --idle seconds with every connector streaming and no
  events (per connector: divide by six);
- catch-up: the time and CPU to drain a backlog of --events events per connector written while the
  relays were stopped, and the throughput that makes.

    cargo build --release --bins && python3 bench/worker-overhead.py [--events 20000] [--idle 30]

Needs the services scripts/install.sh installs (PostgreSQL, the tansu broker).
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "pgoutbox")
CONNECTORS = 6
TICK = os.sysconf("SC_CLK_TCK")


def sh(script):
    # The services outlive the shell: their output goes to their logs, not to this pipe.
    return subprocess.run(["bash", "-c", f". {ROOT}/scripts/lib.sh; {script}"], check=True,
                          stdout=subprocess.PIPE, stderr=sys.stderr, text=True).stdout.strip()


class Services:
    def __init__(self, work):
        self.work = work
        out = sh(f'services_up {work} >&2; echo "$pg_port $broker_port"; pg_bindir')
        ports, self.bindir = out.splitlines()[-2], out.splitlines()[-1]
        pg, broker = ports.split()
        self.pg_port, self.broker = int(pg), f"127.0.0.1:{broker}"

    def psql(self, sql):
        return subprocess.run([os.path.join(self.bindir, "psql"), "-h", "127.0.0.1", "-p", str(self.pg_port),
                               "-U", "postgres", "-d", "postgres", "-qAtX", "-v", "ON_ERROR_STOP=1", "-c", sql],
                              check=True, capture_output=True, text=True).stdout.strip()

    def down(self):
        sh(f"services_down {self.work} immediate")


def connector(svc, i, mode):
    return {
        "name": f"c{i}",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": str(svc.pg_port), "database.user": "postgres",
        "database.dbname": "postgres", "database.sslmode": "disable", "topic.prefix": f"server{i}",
        "plugin.name": "pgoutput", "slot.name": f"bench_{mode}_c{i}", "publication.name": f"bench_{mode}_pub{i}",
        "publication.autocreate.mode": "filtered", "table.include.list": f"public.outbox{i}",
        "snapshot.mode": "no_data", "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.route.topic.replacement": f"bench{i}.${{routedByValue}}",
        "offset.storage.topic": f"bench-offsets-{mode}",
        # Confirmed positions are what the drain is timed by: confirm them often.
        "status.update.interval.ms": "200",
        "topic.creation.default.partitions": "3", "topic.creation.default.replication.factor": "1",
    }


def write_props(path, entries):
    with open(path, "w") as f:
        for k, v in entries.items():
            f.write(f"{k}={v}\n")


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def proc_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start(svc, work, mode):
    procs = []
    log = open(os.path.join(work, f"{mode}.log"), "a")
    if mode == "run":
        for i in range(CONNECTORS):
            cfg = dict(connector(svc, i, mode), **{"bootstrap.servers": svc.broker})
            path = os.path.join(work, f"run{i}.properties")
            write_props(path, cfg)
            procs.append(subprocess.Popen([BIN, "run", "--config", path], stdout=log, stderr=log))
    else:
        worker = os.path.join(work, "worker.properties")
        port = int(sh("free_port"))
        write_props(worker, {"bootstrap.servers": svc.broker, "listeners": f"http://127.0.0.1:{port}"})
        files = []
        for i in range(CONNECTORS):
            path = os.path.join(work, f"conn{i}.properties")
            write_props(path, connector(svc, i, mode))
            files.append(path)
        procs.append(subprocess.Popen([BIN, "connect", "--worker", worker] + files, stdout=log, stderr=log))
    return procs


def wait_streaming(svc, procs):
    deadline = time.time() + 60
    while time.time() < deadline:
        if any(p.poll() is not None for p in procs):
            sys.exit("a relay exited early; see the logs in the work directory")
        active = svc.psql("SELECT count(*) FROM pg_replication_slots WHERE active AND slot_name LIKE 'bench_%'")
        if int(active) == CONNECTORS:
            return
        time.sleep(0.2)
    sys.exit("the connectors never all streamed")


def stop(procs):
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=60)


def caught_up(svc, target):
    behind = svc.psql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'bench_%' "
                      f"AND (confirmed_flush_lsn IS NULL OR confirmed_flush_lsn < '{target}')")
    return int(behind) == 0


def measure(svc, work, mode, events, idle):
    procs = start(svc, work, mode)
    wait_streaming(svc, procs)
    time.sleep(2)
    cpu0 = sum(proc_cpu(p.pid) for p in procs)
    time.sleep(idle)
    idle_cpu = sum(proc_cpu(p.pid) for p in procs) - cpu0
    idle_rss = sum(proc_rss_mb(p.pid) for p in procs)
    stop(procs)
    # The backlog, written while nothing streams: ten-event transactions, one aggregate per ten.
    for i in range(CONNECTORS):
        svc.psql(f"INSERT INTO outbox{i} (id, aggregatetype, aggregateid, type, payload) "
                 f"SELECT gen_random_uuid(), 'Order', (g / 10)::text, 'Created', "
                 f"jsonb_build_object('n', g, 'pad', repeat('x', 200)) FROM generate_series(1, {events}) g")
    target = svc.psql("SELECT pg_current_wal_lsn()")
    began = time.time()
    procs = start(svc, work, mode)
    while not caught_up(svc, target):
        if time.time() - began > 600:
            sys.exit("the backlog never drained")
        time.sleep(0.05)
    drain = time.time() - began
    drain_cpu = sum(proc_cpu(p.pid) for p in procs)
    drain_rss = sum(proc_rss_mb(p.pid) for p in procs)
    stop(procs)
    svc.psql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'bench_%'")
    for i in range(CONNECTORS):
        svc.psql(f"TRUNCATE outbox{i}")
    return {"idle_cpu": idle_cpu, "idle_rss": idle_rss, "drain_s": drain, "drain_cpu": drain_cpu,
            "drain_rss": drain_rss, "eps": CONNECTORS * events / drain}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20000, help="backlog events per connector")
    ap.add_argument("--idle", type=int, default=30, help="idle seconds measured")
    args = ap.parse_args()
    if not os.path.exists(BIN):
        sys.exit(f"{BIN} not found: cargo build --release --bins")
    work = tempfile.mkdtemp(prefix="pgoutbox-worker-bench-")
    os.chmod(work, 0o755)  # PostgreSQL runs as `postgres` and must reach its data directory
    svc = Services(os.path.join(work, "svc"))
    try:
        for i in range(CONNECTORS):
            svc.psql(f"CREATE TABLE outbox{i} (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, "
                     f"aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)")
        results = {mode: measure(svc, work, mode, args.events, args.idle) for mode in ("run", "connect")}
    finally:
        svc.down()
    print(f"six connectors; idle {args.idle} s; backlog {args.events} events per connector")
    print(f"{'hosting':<34}{'idle CPU s':>11}{'idle RSS MB':>12}{'drain s':>9}{'events/s':>10}"
          f"{'drain CPU s':>12}{'drain RSS MB':>13}")
    names = {"run": "6 x pgoutbox run", "connect": "1 x pgoutbox connect (6 connectors)"}
    for mode, r in results.items():
        print(f"{names[mode]:<34}{r['idle_cpu']:>11.2f}{r['idle_rss']:>12.1f}{r['drain_s']:>9.2f}{r['eps']:>10.0f}"
              f"{r['drain_cpu']:>12.2f}{r['drain_rss']:>13.1f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
