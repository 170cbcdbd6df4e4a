#!/usr/bin/env python3
"""Issue 22: Loom replicas behind vllm-router, routed by their real KV cache.

scripts/cluster.sh starts 3 replicas of a small synthetic model and vllm-router in front (loopback
only). The workload: 6 conversation groups x 10 requests, each group sharing a 256-token prefix
with a different 16-token tail, interleaved across groups in a shuffled order each round. Each group's first request goes straight
to replica (group % 3), as earlier traffic would have left it there; the other 54 go through the
router. The prefix-cache hit rate, in prompt tokens, is read from every replica's /metrics
(vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total, i.e. cached prompt tokens over
prompt tokens, summed) and compared with the same 60 requests sent to one replica:
  - kv_aware (fed by the replicas' ZMQ KV events) and cache_aware must reach >= 80% of it;
  - kv_aware must also send every routed request of a group to the replica holding its prefix,
    which only the events can tell it (the warm-up requests never went through the router);
  - round_robin is reported beside them for contrast;
  - a replica killed mid-run (SIGKILL, 12 requests in flight): every request is answered or refused
    with an error body, none hangs; restarted, its first event batch is AllBlocksCleared and the
    router sends it requests again.
Bounded: 60 requests per policy, one token each, each with a 60 s timeout. Skips (77) when
vllm-router is not installed (pip install vllm-router; scripts/setup.sh does).
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

GROUPS, PER_GROUP, PREFIX, TAIL, BLOCK = 6, 10, 256, 16, 16
REPLICAS = 3


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def post(port, path, body, timeout=60):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=timeout).read())


def prefix_counters(port):
    """(cached prompt tokens, prompt tokens) under vLLM's metric names."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith("vllm:prefix_cache_"):
            name, value = line.rsplit(" ", 1)
            values[name.split("{")[0]] = float(value)
    return values["vllm:prefix_cache_hits_total"], values["vllm:prefix_cache_queries_total"]


def workload():
    rng = random.Random(22)
    prefixes = [[rng.randrange(3, 500) for _ in range(PREFIX)] for _ in range(GROUPS)]
    requests = []  # (group, request index within the group, tokens), interleaved across groups
    for j in range(PER_GROUP):
        # A different group order every round, as independent users arrive (a fixed order of 6
        # groups over 3 replicas would make round_robin accidentally sticky).
        for g in rng.sample(range(GROUPS), GROUPS):
            requests.append((g, j, prefixes[g] + [rng.randrange(3, 500) for _ in range(TAIL)]))
    return requests


def complete(port, tokens):
    post(port, "/v1/completions", {"prompt": tokens, "max_tokens": 1, "temperature": 0})


class Cluster:
    def __init__(self, script, loom, model, policy, scratch, tag=""):
        self.router = free_ports(1)[0]
        # Consecutive worker ports and event ports, as cluster.sh numbers them.
        self.worker_base = self._free_run(REPLICAS)
        self.event_base = self._free_run(2 * REPLICAS)
        self.workers = [self.worker_base + i for i in range(REPLICAS)]
        self.log = open(os.path.join(scratch, f"cluster-{policy}{tag}.log"), "w+")
        self.proc = subprocess.Popen(
            ["bash", script, "--replicas", str(REPLICAS), "--model", model, "--policy", policy, "--loom", loom,
             "--router-port", str(self.router), "--worker-port", str(self.worker_base),
             "--event-port", str(self.event_base), "--metrics-port", str(free_ports(1)[0]),
             "--config", os.path.join(scratch, "replica.toml")],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            self.log.seek(0)
            out = self.log.read()
            if "cluster: ready" in out:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"cluster.sh exited:\n{out}")
            time.sleep(0.2)
        raise RuntimeError("cluster did not become ready in 120 s")

    @staticmethod
    def _free_run(n):
        """The first of n consecutive free loopback ports."""
        for _ in range(200):
            base = random.randrange(20000, 60000 - n)
            try:
                socks = []
                for p in range(base, base + n):
                    s = socket.socket()
                    s.bind(("127.0.0.1", p))
                    socks.append(s)
                for s in socks:
                    s.close()
                return base
            except OSError:
                for s in socks:
                    s.close()
        raise RuntimeError("no run of free ports")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def run_policy(args, policy, scratch, requests):
    cluster = Cluster(args.script, args.loom, args.model, policy, scratch)
    try:
        before = [prefix_counters(p) for p in cluster.workers]
        for g, j, tokens in requests:
            if j == 0:
                complete(cluster.workers[g % REPLICAS], tokens)  # the group's history on one replica
            else:
                complete(cluster.router, tokens)
                time.sleep(0.02)  # let the replica's events reach the router, as between user turns
        after = [prefix_counters(p) for p in cluster.workers]
    finally:
        cluster.stop()
    hits = [a[0] - b[0] for a, b in zip(after, before)]
    queries = [a[1] - b[1] for a, b in zip(after, before)]
    return sum(hits) / sum(queries), hits


def status_of(port, tokens, timeout=60):
    """HTTP status of one completion through the router (an error status counts as an answer)."""
    try:
        post(port, "/v1/completions", {"prompt": tokens, "max_tokens": 32, "temperature": 0}, timeout=timeout)
        return 200
    except urllib.error.HTTPError as e:
        body = e.read()
        assert body, f"error {e.code} without a body"
        return e.code


def run_failover(args, scratch):
    """A replica killed mid-run: every in-flight request is answered or refused with an error, none
    hangs; the restarted replica clears its blocks (AllBlocksCleared first) and rejoins."""
    import threading
    import zmq
    import msgspec
    # round_robin: every healthy replica gets its turn, so rejoining is visible within a few requests.
    cluster = Cluster(args.script, args.loom, args.model, "round_robin", scratch, tag="failover")
    try:
        cluster.log.seek(0)
        logs = cluster.log.read().split("logs in ")[1].split(")")[0]
        victim = cluster.workers[1]
        rng = random.Random(7)
        results = []
        def client(k):
            tokens = [rng.randrange(3, 500) for _ in range(64 + k)]
            results.append(status_of(cluster.router, tokens))
        threads = [threading.Thread(target=client, args=(k,)) for k in range(12)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        pid = subprocess.run(["pgrep", "-f", f"serve .*--port {victim}"], capture_output=True, text=True).stdout.split()
        assert pid, "replica 1 not found"
        os.kill(int(pid[0]), signal.SIGKILL)
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a request hung after a replica was killed"
        print(f"replica killed mid-run: {len(results)} of 12 answered, statuses {sorted(results)}")
        assert len(results) == 12

        replica = subprocess.Popen([args.loom, "serve", "--config", os.path.join(logs, "replica-1.toml"), "--model",
                                    args.model, "--host", "127.0.0.1", "--port", str(victim)],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            assert "listening on" in replica.stdout.readline()
            dealer = zmq.Context.instance().socket(zmq.DEALER)
            dealer.connect(f"tcp://127.0.0.1:{cluster.event_base + 3}")
            dealer.send_multipart([b"", (0).to_bytes(8, "big")])
            assert dealer.poll(5000), "the restarted replica's replay did not answer"
            _, _, seq, payload = dealer.recv_multipart()
            first = msgspec.msgpack.decode(payload)
            assert int.from_bytes(seq, "big") == 0 and first[1] == [{"type": "AllBlocksCleared"}], first
            dealer.close(0)
            print("restarted replica: batch 0 is AllBlocksCleared")
            # Rejoins: fresh prompts through the router until one is served there.
            deadline, served = time.time() + 60, 0
            while time.time() < deadline and served == 0:
                status_of(cluster.router, [rng.randrange(3, 500) for _ in range(40)])
                served = prefix_counters(victim)[1]
            assert served > 0, "the restarted replica got no request within 60 s"
            print("restarted replica rejoined: it serves requests again")
        finally:
            os.killpg(replica.pid, signal.SIGTERM)
            replica.wait(30)
    finally:
        cluster.stop()


def run_single(args, scratch, requests):
    port = free_ports(1)[0]
    proc = subprocess.Popen([args.loom, "serve", "--config", os.path.join(scratch, "replica.toml"), "--model", args.model,
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert "listening on" in proc.stdout.readline()
        h0, q0 = prefix_counters(port)
        for _, _, tokens in requests:
            complete(port, tokens)
        h1, q1 = prefix_counters(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return (h1 - h0) / (q1 - q0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", required=True)
    ap.add_argument("--script", required=True)
    args = ap.parse_args()
    if shutil.which("vllm-router") is None:
        print("SKIP: vllm-router is not installed (pip install vllm-router)")
        sys.exit(77)
    scratch = tempfile.mkdtemp(prefix="loom-router-test-")
    args.model = os.path.join(scratch, "model.gguf")
    subprocess.run([args.loom, "gguf", "synth", "--arch", "llama", "--layers", "2", "--dim", "64", "--heads", "4",
                    "--kv-heads", "2", "--ff", "128", "--vocab", "512", "--ctx", "2048", "-o", args.model],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(scratch, "replica.toml"), "w") as f:
        f.write('[backend]\nthreads = 1\n[kv]\nmemory = "64MiB"\nblock_size = 16\n[scheduler]\nmax_num_seqs = 8\n')
    requests = workload()

    single = run_single(args, scratch, requests)
    print(f"single replica: prefix-cache hit rate {single:.3f}")
    results, per_replica = {}, {}
    for policy in ("kv_aware", "cache_aware", "round_robin"):
        rate, hits = run_policy(args, policy, scratch, requests)
        results[policy], per_replica[policy] = rate, hits
        print(f"{policy:12s}: hit rate {rate:.3f} = {rate / single:.2f} of one replica; hits per replica {hits}")

    ok = True
    for policy in ("kv_aware", "cache_aware"):
        if results[policy] < 0.8 * single:
            print(f"FAIL: {policy} reaches {results[policy] / single:.2f} of the single-replica hit rate (need >= 0.80)")
            ok = False
    # kv_aware learned where each prefix lives only from the events: every routed request finds its
    # whole prefix (9 requests x 256 tokens per group, two groups per replica).
    expected = (PER_GROUP - 1) * PREFIX * (GROUPS // REPLICAS)
    if per_replica["kv_aware"] != [expected] * REPLICAS:
        print(f"FAIL: kv_aware hits per replica {per_replica['kv_aware']}, expected {expected} on each "
              "(every routed request on the replica holding its group's prefix)")
        ok = False
    print(f"round_robin for contrast: {results['round_robin'] / single:.2f} of one replica")
    if not ok:
        sys.exit(1)
    run_failover(args, scratch)
    print("PASS")


if __name__ == "__main__":
    main()
