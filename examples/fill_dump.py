"""Fill a dump folder's outputs with any mxbi-exec/1 runner (the mxbi side of the protocol).

    mxbi bi gen --out DIR <bi run options>
    python3 examples/fill_dump.py DIR python3 examples/runner_torch.py matmul f32
    mxbi bi run --subject dump:DIR <the same options>

Starts the runner command once, checks its hello line, sends every job of DIR/manifest.json
(schema "mxbi-bi-dump/1") as one JSON line naming DIR/job-NNNNNN/{a,b,out}.npy and waits for
the answer to that job. An error answer, a wrong job number, a non-JSON line or the runner's
exit stops with one line on stderr and exit code 2: a dump is filled completely or not at all
(a partly written out.npy would be read by `dump:` as the subject's answer).
"""
import json
import os
import subprocess
import sys

PROTOCOL = "mxbi-exec/1"


def fail(msg):
    sys.stderr.write(f"fill_dump: {msg}\n")
    sys.exit(2)


def main():
    if len(sys.argv) < 3:
        fail("usage: fill_dump.py DIR RUNNER-COMMAND...")
    folder = os.path.abspath(sys.argv[1])
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest.get("schema") != "mxbi-bi-dump/1":
        fail(f"{folder}/manifest.json: schema {manifest.get('schema')!r}, expected 'mxbi-bi-dump/1'")
    runner = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def answer():
        line = runner.stdout.readline()
        if not line:
            fail(f"the runner exited (code {runner.wait()})")
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            fail(f"the runner printed a non-JSON line: {line.strip()[:200]!r}")

    hello = answer()
    if hello.get("protocol") != PROTOCOL:
        fail(f"the runner speaks {hello.get('protocol')!r}, expected {PROTOCOL!r}")
    written = []
    for job in manifest["jobs"]:
        out = os.path.join(folder, job["out"])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        req = {
            "job": job["job"],
            "a": os.path.join(folder, job["a"]),
            "b": os.path.join(folder, job["b"]),
            "m": job["m"],
            "k": job["k"],
            "n": job["n"],
            "input": job["input"],
            "out": out,
        }
        runner.stdin.write(json.dumps(req) + "\n")
        runner.stdin.flush()
        got = answer()
        if got.get("job") != job["job"]:
            fail(f"asked for job {job['job']}, the runner answered {got!r}")
        written.append(out)
        if "error" in got:
            for path in written:
                if os.path.exists(path):
                    os.remove(path)
            fail(f"job {job['job']} (M={job['m']}): {got['error']}")
    runner.stdin.close()
    runner.wait()
    print(f"{hello.get('name')}: {len(written)} jobs written under {folder}")


if __name__ == "__main__":
    main()
