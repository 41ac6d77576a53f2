"""Harness throughput of the metacognition games: capabilities-test questions per second, stored to JSONL.

- simulated: ``SimulatedBackend`` (positive control) through ``run_queries`` in batches of 64.
- substrate, batched: ``LocalLMBackend`` on a seeded random 2 × d64 litlab LLaMA (speed does not depend
  on training), batches of 32: one forward for the label log-probs plus greedy 3-token replies.
- substrate, one at a time (the peer: a plain loop that sends each prompt alone, as a per-request endpoint
  would): the same backend with batch size 1.
- http: ``OpenAIBackend`` against a local ``http.server`` returning a fixed reply (harness and JSON
  overhead only; a real endpoint's latency dominates in practice).

Process CPU time for the local parts (one thread; a shared machine's load hardly moves it), wall time for
http; the median of ``--repeats``. Run:  python benchmarks/metacog_throughput.py [--quick]
Writes benchmarks/results/metacog_throughput[_quick].json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import torch

from litlab.core.machine import machine_info
from litlab.datamodules.metacog_questions import make_questions, qa_document
from litlab.datamodules.tokenizers import train_bpe, wrap_tokenizer
from litlab.lm import build_lm, llama_config
from litlab.methods.metacog.agents import SimulatedAgent, SimulatedBackend
from litlab.methods.metacog.games import capabilities_queries, load_prompts
from litlab.methods.metacog.local import LocalLMBackend
from litlab.methods.metacog.openai_backend import OpenAIBackend
from litlab.methods.metacog.store import run_queries

RESULTS = Path(__file__).resolve().parent / "results"


class Endpoint(BaseHTTPRequestHandler):
    """A chat-completions endpoint that always answers "B" with first-token log-probs."""

    reply = json.dumps(
        {
            "choices": [
                {
                    "message": {"content": "B"},
                    "logprobs": {
                        "content": [
                            {"token": "B", "logprob": -0.1, "top_logprobs": [{"token": "B", "logprob": -0.1}]}
                        ]
                    },
                }
            ]
        }
    ).encode()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.reply)))
        self.end_headers()
        self.wfile.write(self.reply)

    def log_message(self, *args: object) -> None:
        pass


def rate(backend, queries, batch_size: int, repeats: int, clock=time.process_time) -> float:
    """Median questions per second of ``run_queries`` into a fresh JSONL file."""
    rates = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            start = clock()
            run_queries(backend, queries, Path(folder) / "a.jsonl", batch_size)
            rates.append(len(queries) / (clock() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    n_sim, n_lm = (2000, 64) if args.quick else (20000, 256)
    prompts = load_prompts("capabilities")
    sim_queries = capabilities_queries(make_questions(n_sim, 0), prompts)
    lm_queries = sim_queries[:n_lm]
    tokenizer = wrap_tokenizer(train_bpe([qa_document(q) for q in make_questions(500, 1)], 384))
    torch.manual_seed(0)
    model = build_lm(llama_config(len(tokenizer), hidden_size=64, num_layers=2, num_heads=2), "causal").eval()
    local = LocalLMBackend(model, tokenizer, max_new_tokens=3)
    server = HTTPServer(("127.0.0.1", 0), Endpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    http = OpenAIBackend(f"http://127.0.0.1:{server.server_address[1]}/v1", "bench", api_key_env=None)
    results = {
        "simulated_questions_per_s": rate(
            SimulatedBackend(SimulatedAgent("positive")), sim_queries, 64, args.repeats
        ),
        "substrate_batched_questions_per_s": rate(local, lm_queries, 32, args.repeats),
        "substrate_one_at_a_time_questions_per_s": rate(local, lm_queries, 1, args.repeats),
        "http_local_server_questions_per_s": rate(http, lm_queries, 32, args.repeats, time.perf_counter),
    }
    server.shutdown()
    results["substrate_batching_speedup"] = (
        results["substrate_batched_questions_per_s"] / results["substrate_one_at_a_time_questions_per_s"]
    )
    out = {
        "benchmark": "metacog_throughput",
        "quick": args.quick,
        "n_simulated": n_sim,
        "n_substrate": n_lm,
        "repeats": args.repeats,
        "load_average": os.getloadavg()[0],
        "machine": machine_info(),
        "results": {k: round(v, 2) for k, v in results.items()},
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"metacog_throughput{'_quick' if args.quick else ''}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["results"], indent=2))


if __name__ == "__main__":
    main()
