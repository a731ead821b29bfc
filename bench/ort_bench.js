#!/usr/bin/env node
'use strict';
// usage: node bench/ort_bench.js MODEL --input NAME=FILE.npy ... [--warmup N]
//            [--iterations N] [--rounds N] [--threads N] [--paced] [--json]
//
// The onnxruntime side of bench/run.sh: times onnxruntime-node (CPU,
// graphOptimizationLevel 'all', intraOpNumThreads = --threads,
// interOpNumThreads 1, sequential) the way `tandem bench` times tandem:
// one session, --warmup untimed runs, then --rounds × --iterations timed
// runs of session.run alone (process.hrtime, monotonic). Every model input
// must be given as a .npy file (read with scripts/oracle/npy.js).
//
// --paced speaks `tandem bench --paced`'s protocol: after the warm-up it
// prints {"event": "ready"}; before each round it waits for a line on stdin,
// after it prints {"event": "round", "round": K, "samples_ms": [...]}.
// At the end it prints the same figures as `tandem bench --json` (one JSON
// document), with peak_rss_bytes (VmHWM of this process) and also
// baseline_rss_bytes (the resident size of node itself, before onnxruntime
// was loaded) and peak_rss_net_bytes (their difference).
//
// onnxruntime-node is loaded from $TANDEM_CACHE/npm (default <repo>/.cache/npm);
// scripts/oracle/setup.sh installs it there. Errors: one sentence on stderr,
// exit status 1 (2 for bad usage).

const baselineRss = process.memoryUsage().rss;
if (!process.env.ORT_DISABLE_TELEMETRY) process.env.ORT_DISABLE_TELEMETRY = '1';

const fs = require('fs');
const path = require('path');
const readline = require('readline');

const ROOT = path.resolve(__dirname, '..');
const { readNpy } = require(path.join(ROOT, 'scripts', 'oracle', 'npy.js'));

function die(msg, code) {
  const one = String(msg).replace(/\s*\n\s*/g, ' ').trim();
  process.stderr.write(`ort_bench: ${one}\n`);
  process.exit(code || 1);
}

function parseArgs(argv) {
  const a = { model: null, inputs: {}, warmup: 10, iterations: 50, rounds: 1, threads: 1, paced: false, json: false };
  const count = (opt, v, lo, hi) => {
    const n = Number(v);
    if (!/^[0-9]+$/.test(String(v)) || n < lo || n > hi) die(`${opt} expects a number from ${lo} to ${hi}, not '${v}'.`, 2);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let val = null;
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    if (eq > 0 && arg !== '--input') {
      val = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const value = () => {
      if (val !== null) return val;
      if (i + 1 >= argv.length) die(`option '${arg}' needs a value.`, 2);
      return argv[++i];
    };
    switch (arg) {
      case '-h': case '--help':
        process.stdout.write('usage: node bench/ort_bench.js MODEL --input NAME=FILE.npy ... [--warmup N] '
          + '[--iterations N] [--rounds N] [--threads N] [--paced] [--json]\n');
        process.exit(0);
        break;
      case '--json': a.json = true; break;
      case '--paced': a.paced = true; break;
      case '--warmup': a.warmup = count(arg, value(), 0, 1000000); break;
      case '--iterations': a.iterations = count(arg, value(), 1, 1000000); break;
      case '--rounds': a.rounds = count(arg, value(), 1, 10000); break;
      case '--threads': a.threads = count(arg, value(), 0, 4096); break;
      case '--input': {
        const p = value();
        const k = p.lastIndexOf('=');
        if (k <= 0 || k === p.length - 1) die(`--input expects NAME=FILE.npy, not '${p}'.`, 2);
        const name = p.slice(0, k);
        if (name in a.inputs) die(`input '${name}' is given twice.`, 2);
        a.inputs[name] = p.slice(k + 1);
        break;
      }
      default:
        if (arg.startsWith('-')) die(`unknown option '${arg}'.`, 2);
        if (a.model) die(`one MODEL only ('${a.model}' and '${arg}' given).`, 2);
        a.model = arg;
    }
  }
  if (!a.model) die('no MODEL given; see --help.', 2);
  return a;
}

function loadOrt() {
  const cache = process.env.TANDEM_CACHE || path.join(ROOT, '.cache');
  const dir = path.join(cache, 'npm', 'node_modules', 'onnxruntime-node');
  if (!fs.existsSync(path.join(dir, 'package.json'))) {
    die(`onnxruntime-node is not installed in ${path.dirname(dir)}; run scripts/oracle/setup.sh first.`);
  }
  try {
    const version = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
    return { ort: require(dir), version };
  } catch (e) {
    die(`cannot load onnxruntime-node from ${dir}: ${e.message}`);
  }
  return null;
}

function peakRssBytes() {
  try {
    const m = /^VmHWM:\s*(\d+)\s*kB/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) return Number(m[1]) * 1024;
  } catch (_) { /* not Linux */ }
  return process.resourceUsage().maxRSS * 1024;
}

// Same definitions as tools/tandem/bench.c: nearest-rank percentiles, the
// median of an even count is the mean of the two middle samples.
function stats(samples) {
  const s = samples.slice().sort((x, y) => x - y);
  const n = s.length;
  const sum = s.reduce((x, y) => x + y, 0);
  const mean = sum / n;
  const pct = (p) => s[Math.min(n, Math.max(1, Math.ceil((p / 100) * n))) - 1];
  const variance = n > 1 ? s.reduce((acc, x) => acc + (x - mean) * (x - mean), 0) / (n - 1) : 0;
  return {
    median_ms: n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2,
    p90_ms: pct(90),
    p99_ms: pct(99),
    min_ms: s[0],
    mean_ms: mean,
    max_ms: s[n - 1],
    stddev_ms: Math.sqrt(variance),
    samples: n,
    throughput_per_s: sum > 0 ? (1e3 * n) / sum : 0,
  };
}

function lineReader() {
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  const it = rl[Symbol.asyncIterator]();
  return {
    next: async () => !(await it.next()).done,
    close: () => rl.close(),
  };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(a.model)) die(`model file ${a.model} does not exist.`);
  const { ort, version } = loadOrt();
  try { ort.env.logLevel = 'fatal'; } catch (_) { /* older versions */ }
  let session;
  try {
    session = await ort.InferenceSession.create(a.model, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: a.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      logSeverityLevel: 4,
    });
  } catch (e) {
    die(`onnxruntime cannot load ${a.model}: ${e.message}`);
  }
  for (const name of Object.keys(a.inputs)) {
    if (!session.inputNames.includes(name)) {
      die(`model has no input named '${name}' (its inputs are: ${session.inputNames.join(', ')}).`);
    }
  }
  const feeds = {};
  const shape = {};
  for (const name of session.inputNames) {
    if (!(name in a.inputs)) die(`no value given for model input '${name}'; give --input ${name}=FILE.npy.`, 2);
    let arr;
    try {
      arr = readNpy(a.inputs[name]);
    } catch (e) {
      die(e.message);
    }
    feeds[name] = new ort.Tensor(arr.dtype, arr.data, arr.shape);
    shape[name] = arr.shape.map(Number);
  }
  const runOnce = async () => {
    const t0 = process.hrtime.bigint();
    try {
      await session.run(feeds);
    } catch (e) {
      die(`onnxruntime failed to run ${a.model}: ${e.message}`);
    }
    return Number(process.hrtime.bigint() - t0) / 1e6;
  };

  for (let i = 0; i < a.warmup; i++) await runOnce();
  const lines = a.paced ? lineReader() : null;
  if (a.paced) process.stdout.write('{"event": "ready"}\n');
  const samples = [];
  for (let r = 0; r < a.rounds; r++) {
    if (lines && !(await lines.next())) break;
    const round = [];
    for (let i = 0; i < a.iterations; i++) round.push(await runOnce());
    samples.push(...round);
    if (a.paced) {
      process.stdout.write(`{"event": "round", "round": ${r}, "samples_ms": [${round.map((x) => x.toFixed(6)).join(', ')}]}\n`);
    }
  }
  if (lines) lines.close();
  if (samples.length === 0) die('no timed run was made (the input of --paced ended first).');
  const st = stats(samples);
  const first = shape[session.inputNames[0]];
  const batch = first && first.length ? first[0] : 1;
  const peak = peakRssBytes();
  const out = {
    model: a.model,
    runtime: `onnxruntime-node ${version}`,
    devices: ['cpu'],
    threads: a.threads,
    warmup: a.warmup,
    iterations: a.iterations,
    rounds: a.rounds,
    shape,
    ...st,
    batch,
    items_per_s: st.throughput_per_s * batch,
    peak_rss_bytes: peak,
    baseline_rss_bytes: baselineRss,
    peak_rss_net_bytes: peak - baselineRss,
  };
  if (a.json) {
    process.stdout.write(JSON.stringify(out, null, 2) + '\n');
  } else {
    process.stdout.write(`model       ${a.model}\nruntime     ${out.runtime}\nthreads     ${a.threads}\n`
      + `latency ms  median ${st.median_ms.toFixed(3)}  p90 ${st.p90_ms.toFixed(3)}  p99 ${st.p99_ms.toFixed(3)}`
      + `  min ${st.min_ms.toFixed(3)}  mean ${st.mean_ms.toFixed(3)}  max ${st.max_ms.toFixed(3)}\n`
      + `throughput  ${st.throughput_per_s.toFixed(2)} runs/s\n`
      + `peak RSS    ${(peak / 1048576).toFixed(1)} MiB (node itself: ${(baselineRss / 1048576).toFixed(1)} MiB)\n`);
  }
  if (session.release) await session.release();
}

main().catch((e) => die(e && e.message ? e.message : String(e)));
