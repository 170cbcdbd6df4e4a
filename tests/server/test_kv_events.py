#!/usr/bin/env python3
"""Issue 22: `loom serve` publishes its prefix cache's block events in vLLM's wire format.

A subscriber built from vLLM's published event schema (vllm/distributed/kv_events.py: the batch an
array [ts, events, data_parallel_rank], events maps tagged by "type") decodes every batch strictly,
so a field of the wrong name or type fails here before it fails in a router. Checked on a
synthetic model:
  - a prompt of five full blocks yields five BlockStored events whose token_ids are the prompt's
    tokens block by block, chained by parent_block_hash, block_size 16;
  - the same prompt again stores nothing new (its blocks are reused);
  - a KV pool too small for both of two long prompts evicts blocks: BlockRemoved names hashes that
    were stored before;
  - the first batch a fresh server sends is AllBlocksCleared (a router drops what it knew of it);
  - the replay socket returns every batch from a given sequence number, then the end marker (-1);
  - /metrics carries vLLM's gauge names (vllm:num_requests_running, ..., vllm:kv_cache_usage_perc);
  - a LoRA adapter's requests (issue 39) store their blocks under other hashes, with lora_id and lora_name.
Skips (77) without pyzmq or msgspec.
"""
import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness as h  # noqa: E402

try:
    import msgspec
    import zmq
except ImportError as e:
    print(f"SKIP: {e} (pip install pyzmq msgspec)")
    sys.exit(77)


# vLLM's event schema (field names, order, optionality), as a strict decoder.
class BlockStored(msgspec.Struct, tag=True, omit_defaults=True):
    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None = None


class BlockRemoved(msgspec.Struct, tag=True, omit_defaults=True):
    block_hashes: list[int | bytes]
    medium: str | None


class AllBlocksCleared(msgspec.Struct, tag=True, omit_defaults=True):
    pass


# vllm-router (the consumer that matters) decodes only the array form of the batch: vLLM's
# array_like EventBatch.
class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True):
    ts: float
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]
    data_parallel_rank: int | None = None


DECODER = msgspec.msgpack.Decoder(KVEventBatch)
BLOCK = 16


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Subscriber:
    def __init__(self, port, topic):
        self.ctx = zmq.Context.instance()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.connect(f"tcp://127.0.0.1:{port}")
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self.topic = topic.encode()
        self.last_seq = -1
        self.batches = []

    def drain(self, settle=0.5):
        """Receive until nothing arrives for `settle` seconds; returns the new events."""
        events = []
        while self.sub.poll(int(settle * 1000)):
            topic, seq, payload = self.sub.recv_multipart()
            assert topic == self.topic, topic
            seq = int.from_bytes(seq, "big")
            assert seq == self.last_seq + 1, f"sequence {seq} after {self.last_seq}"
            self.last_seq = seq
            batch = DECODER.decode(payload)
            assert batch.data_parallel_rank == 0
            self.batches.append((seq, payload))
            events.extend(batch.events)
        return events


def tokens_of(server, text):
    status, body = server.json("POST", "/tokenize", {"content": text, "add_special": True})
    assert status == 200, body
    return body["tokens"]


def complete(server, prompt, max_tokens=1):
    status, body = server.json("POST", "/v1/completions", {"model": "m", "prompt": prompt, "max_tokens": max_tokens,
                                                           "temperature": 0})
    assert status == 200, body


def check_stored(events, prompt_tokens, known):
    """The BlockStored events of one prompt: its full blocks, in order, chained."""
    stored = [e for e in events if isinstance(e, BlockStored)]
    n_full = len(prompt_tokens) // BLOCK
    assert len(stored) == n_full, f"{len(stored)} BlockStored for {n_full} full blocks"
    parent = None
    for i, e in enumerate(stored):
        assert e.block_size == BLOCK and len(e.block_hashes) == 1, e
        assert e.token_ids == prompt_tokens[i * BLOCK:(i + 1) * BLOCK], f"block {i}: {e.token_ids}"
        assert e.parent_block_hash == parent, f"block {i}: parent {e.parent_block_hash}, expected {parent}"
        assert e.medium == "GPU" and e.lora_id is None
        parent = e.block_hashes[0]
        known.add(parent)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", required=True)
    ap.add_argument("--plugins", required=True)
    args = ap.parse_args()
    h.configure(args.loom, args.plugins)

    # 2 KiB of KV per token, so the smallest pool (1 MiB) holds 32 blocks.
    model = h.synth(os.path.join(h.TMP.name, "kv-events.gguf"), ctx=512, layers=8, kv_heads=4)
    pub_port, replay_port = free_port(), free_port()
    # A pool of 32 blocks: three more 11-block prompts cannot all stay cached beside the first.
    config = h.write_config("kv-events.toml", extra=f"""
model_name = "m"

[server.kv_events]
enabled = true
endpoint = "tcp://127.0.0.1:{pub_port}"
mode = "bind"
replay_endpoint = "tcp://127.0.0.1:{replay_port}"
topic = "loom"
""", kv_memory="1MiB")
    adapter = os.path.join(h.TMP.name, "kv-events-lora.gguf")
    done = h.run_loom("gguf", "synth-lora", "--model", model, "--rank", "4", "-o", adapter)
    assert done.returncode == 0, done.stderr
    server = h.LoomServer(config, model, ["--lora", f"tuned={adapter}"])
    try:
        sub = Subscriber(pub_port, "loom")
        time.sleep(0.5)  # PUB/SUB: a subscription made after a send misses it

        # Replay from 0 first: a fresh server's first batch clears whatever a router knew before.
        dealer0 = zmq.Context.instance().socket(zmq.DEALER)
        dealer0.connect(f"tcp://127.0.0.1:{replay_port}")
        dealer0.send_multipart([b"", (0).to_bytes(8, "big")])
        assert dealer0.poll(5000), "replay did not answer"
        _, _, seq, payload = dealer0.recv_multipart()
        assert int.from_bytes(seq, "big") == 0 and DECODER.decode(payload).events == [AllBlocksCleared()], payload
        dealer0.close(0)
        sub.drain(settle=0.3)  # the same batch, live (when the subscription was in time)
        if sub.last_seq == -1:
            # PUB/SUB drops what is sent before a subscription lands (a slow start under load): batch
            # 0 was checked through the replay socket instead, so the live stream continues from 1.
            sub.last_seq = 0
            sub.batches.append((0, payload))
        print("startup: batch 0 is AllBlocksCleared")

        prompt_a = " ".join(f"alpha{i}" for i in range(40))
        tokens_a = tokens_of(server, prompt_a)
        assert len(tokens_a) >= 5 * BLOCK + 1, len(tokens_a)
        tokens_a = tokens_a[:5 * BLOCK + 3]
        known = set()
        complete(server, tokens_a)
        events = sub.drain()
        check_stored(events, tokens_a, known)
        print(f"first prompt: {len(events)} events, {len(known)} blocks stored and chained")

        complete(server, tokens_a)
        events = sub.drain()
        assert not [e for e in events if isinstance(e, BlockStored)], f"cached prompt stored again: {events}"
        print("same prompt again: no new blocks")

        status, info = server.json("GET", "/get_server_info")
        assert status == 200 and info["kv_block_size"] == BLOCK and info["kv_events"] is True, info
        status, load = server.json("GET", "/get_load")
        assert status == 200 and load == {"load": 0}, load
        metrics = server.metrics()
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                     "vllm:prefix_cache_hits_total"):
            assert f'{name}{{model_name="m"}}' in metrics, f"{name} missing from /metrics"
        assert metrics['vllm:prefix_cache_hits_total{model_name="m"}'] >= 5 * BLOCK, metrics
        print("vLLM gauges present; prefix-cache hits", metrics['vllm:prefix_cache_hits_total{model_name="m"}'])

        # Evictions: more distinct prompts than the pool holds.
        removed = []
        for k in range(3):
            other = [(t * 7 + k * 131 + 5) % 500 + 3 for t in range(10 * BLOCK + 1)]
            complete(server, other)
            events = sub.drain()
            for e in events:
                if isinstance(e, BlockStored):
                    known.add(e.block_hashes[0])
                elif isinstance(e, BlockRemoved):
                    removed.extend(e.block_hashes)
        assert removed, "no BlockRemoved although the pool overflowed"
        assert all(b in known for b in removed), "BlockRemoved names a block never stored"
        print(f"evictions: {len(removed)} blocks removed, all previously stored")

        # Replay from the second batch: every batch after it, byte for byte, then the end marker.
        dealer = zmq.Context.instance().socket(zmq.DEALER)
        dealer.connect(f"tcp://127.0.0.1:{replay_port}")
        dealer.send_multipart([b"", (1).to_bytes(8, "big")])
        replayed = []
        while True:
            assert dealer.poll(5000), "replay did not answer"
            _, topic, seq, payload = dealer.recv_multipart()
            assert topic == b"loom", topic
            seq = int.from_bytes(seq, "big", signed=True)
            if seq == -1:
                assert payload == b""
                break
            replayed.append((seq, payload))
        assert replayed == sub.batches[1:], f"replayed {len(replayed)} batches, expected {len(sub.batches) - 1}"
        print(f"replay from 1: {len(replayed)} batches, identical")

        # An adapter's blocks: the first prompt's tokens again, in a cache of their own.
        status, body = server.json("POST", "/v1/completions", {"model": "tuned", "prompt": tokens_a, "max_tokens": 1})
        assert status == 200, body
        stored = [e for e in sub.drain() if isinstance(e, BlockStored)]
        assert len(stored) == 5, f"{len(stored)} BlockStored for the adapter's five full blocks"
        assert all(e.lora_id == 1 and e.lora_name == "tuned" for e in stored), stored
        assert not any(e.block_hashes[0] in known for e in stored), "the adapter's blocks reuse the base model's hashes"
        assert [t for e in stored for t in e.token_ids] == tokens_a[:5 * BLOCK]
        print("adapter: five blocks stored apart, with lora_id 1 and lora_name 'tuned'")
    finally:
        code = server.terminate()
    assert code == 0, f"loom serve exited with {code}\n{server.log()}"
    print("PASS")


if __name__ == "__main__":
    main()
