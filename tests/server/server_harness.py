"""What the `loom serve` tests share: a server process on a free loopback port, synthetic models and
configuration files in a scratch folder, and raw HTTP helpers.

configure(loom, plugins) must be called once before anything else.
"""
import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

_LOOM = None
_PLUGINS = None
TMP = tempfile.TemporaryDirectory(prefix="loom-server-test-")


def configure(loom, plugins):
    global _LOOM, _PLUGINS
    _LOOM, _PLUGINS = loom, plugins


def configure_from_argv():
    """configure() from the test's command line (--loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins);
    returns the parsed arguments and the rest, for unittest."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--plugins", required=True)
    args, rest = parser.parse_known_args()
    configure(args.loom, args.plugins)
    return args, rest


def loom_env():
    return dict(os.environ, LOOM_PLUGIN_PATH=_PLUGINS)


def run_loom(*args, **kw):
    return subprocess.run([_LOOM, *args], env=loom_env(), text=True, capture_output=True, **kw)


def synth(path, ctx, layers=2, kv_heads=2):
    subprocess.run([_LOOM, "gguf", "synth", "--arch", "llama", "--layers", str(layers), "--dim", "64", "--heads", "4",
                    "--kv-heads", str(kv_heads), "--ff", "128", "--vocab", "512", "--ctx", str(ctx), "-o", path],
                   check=True, stdout=subprocess.DEVNULL)
    return path


_SHARED_SYNTH = {}


def shared_synth(ctx=512):
    """One synthetic llama (synth()) per test process and context, written on first use: classes that
    only need some model serve the same file."""
    if ctx not in _SHARED_SYNTH:
        _SHARED_SYNTH[ctx] = synth(os.path.join(TMP.name, f"shared-{ctx}.gguf"), ctx)
    return _SHARED_SYNTH[ctx]


def installed_model(record):
    """The path scripts/setup.sh recorded in ~/.cache/loom/RECORD ("default-model.txt": Gemma 3 270M,
    "chat-model.txt": Qwen2.5-Coder 0.5B Instruct), or None when it is not installed."""
    path = os.path.expanduser(os.path.join("~/.cache/loom", record))
    if not os.path.exists(path):
        return None
    with open(path) as f:
        model = f.read().strip()
    return model if os.path.isfile(model) else None


def write_config(name, extra="", kv_memory="4MiB"):
    """A loom.toml in the scratch folder; `extra` is appended to its [server] section."""
    path = os.path.join(TMP.name, name)
    with open(path, "w") as f:
        f.write(
            f"""
[backend]
threads = 2

[kv]
memory = "{kv_memory}"
block_size = 16

[scheduler]
max_num_seqs = 16

[server]
max_body_bytes = 65536
{extra}
"""
        )
    return path


# A template whose generation prompt opens <think> (DeepSeek-R1's way), with Qwen 3's enable_thinking
# switch: a reply forced by a regex to "REASONING</think>\n\nANSWER" comes back as reasoning and answer.
THINKING_TEMPLATE = """{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
<think>
{% if enable_thinking is defined and enable_thinking is false %}</think>

{% endif %}{% endif %}"""


def write_thinking_config(name, extra=""):
    """write_config() with THINKING_TEMPLATE as the model's chat template."""
    path = write_config(name, extra)
    with open(path) as f:
        text = f.read().replace("[server]", "[model]\nchat_template = '''" + THINKING_TEMPLATE + "'''\n\n[server]")
    with open(path, "w") as f:
        f.write(text)
    return path


def parse_metrics(text):
    """Prometheus text as {sample: value}. Engine figures carry a model="NAME" label; each is also
    listed without it (summed over models), so a one-model test reads them by their plain name."""
    values = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        values[name] = float(value)
        plain = re.sub(r'model="(?:[^"\\]|\\.)*",?', "", name).replace(",}", "}").replace("{}", "")
        if plain != name:
            values[plain] = values.get(plain, 0.0) + float(value)
    return values


class LoomServer:
    """One `loom serve` process on a free loopback port."""

    def __init__(self, config, model, extra_args=()):
        """`model` None: the config's [[models]] are served."""
        self.stderr_path = config + ".stderr"
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [_LOOM, "serve", "--config", config, *(["--model", model] if model else []), "--host", "127.0.0.1", "--port", "0",
             *extra_args],
            stdout=subprocess.PIPE, stderr=self.stderr, env=loom_env(), text=True)
        line_box = []
        reader = threading.Thread(target=lambda: line_box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        match = re.search(r"listening on http://([\d.]+):(\d+)", line_box[0] if line_box else "")
        if not match:
            self.proc.kill()
            raise RuntimeError(f"loom serve did not start; stderr:\n{self.log()}")
        self.host, self.port = match.group(1), int(match.group(2))
        self.base = f"http://{self.host}:{self.port}"

    def log(self):
        if not self.stderr.closed:
            self.stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, dict(resp.getheaders()), data
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None):
        status, _, data = self.request(method, path, body, headers)
        return status, json.loads(data)

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200, status
        return parse_metrics(data.decode())

    def wait_kv_free(self, timeout=10.0):
        deadline = time.time() + timeout
        m = self.metrics()
        while m["loom_kv_blocks_used"] != 0 and time.time() < deadline:
            time.sleep(0.05)
            m = self.metrics()
        return m

    def terminate(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.stdout.close()
            self.stderr.close()


def raw_post(host, port, path, body):
    """Sends one POST on a fresh socket and returns the socket, without reading the answer."""
    import socket
    sock = socket.create_connection((host, port), timeout=60)
    payload = body if isinstance(body, str) else json.dumps(body)
    sock.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(payload.encode())}\r\n\r\n").encode() + payload.encode())
    return sock
