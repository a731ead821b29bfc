#!/usr/bin/env node
'use strict';
// usage: node scripts/oracle/ort_run.js MODEL OUTDIR NAME=FILE.npy ...
//
// Runs MODEL with onnxruntime-node (CPU, graphOptimizationLevel 'all',
// intraOpNumThreads from env ORT_THREADS, default 1) on the given .npy inputs
// and writes one OUTDIR/<sanitized output name>.npy per model output, where
// every character outside [A-Za-z0-9._-] becomes '_'.
//
// onnxruntime-node is loaded from $TANDEM_CACHE/npm (default <repo>/.cache/npm);
// scripts/oracle/setup.sh installs it there. Prefer scripts/oracle/ort_run.sh,
// which installs it when needed and sets ORT_DISABLE_TELEMETRY=1.
// On error: one sentence on stderr and exit status 1 (2 for bad usage).

if (!process.env.ORT_DISABLE_TELEMETRY) process.env.ORT_DISABLE_TELEMETRY = '1';

const fs = require('fs');
const path = require('path');
const { readNpy, writeNpy, TYPES } = require('./npy.js');

const USAGE = 'usage: ort_run.js MODEL OUTDIR NAME=FILE.npy ...';

function die(msg, code) {
  const one = String(msg).replace(/\s*\n\s*/g, ' ').trim();
  process.stderr.write(`ort_run: ${one}\n`);
  process.exit(code || 1);
}

function sanitize(name) {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}

function loadOrt() {
  const root = path.resolve(__dirname, '..', '..');
  const cache = process.env.TANDEM_CACHE || path.join(root, '.cache');
  const dir = path.join(cache, 'npm', 'node_modules', 'onnxruntime-node');
  if (!fs.existsSync(path.join(dir, 'package.json'))) {
    die(`onnxruntime-node is not installed in ${path.dirname(dir)}; run scripts/oracle/setup.sh first.`);
  }
  try {
    return require(dir);
  } catch (e) {
    die(`cannot load onnxruntime-node from ${dir}: ${e.message}`);
  }
  return null;
}

async function main(argv) {
  if (argv.length < 2 || argv[0] === '-h' || argv[0] === '--help') die(USAGE, 2);
  const [model, outdir, ...pairs] = argv;

  const threadsEnv = process.env.ORT_THREADS || '1';
  const threads = Number(threadsEnv);
  if (!Number.isInteger(threads) || threads < 0) die(`ORT_THREADS must be a non-negative integer, not '${threadsEnv}'.`, 2);

  const feedsNpy = {};
  for (const p of pairs) {
    const eq = p.indexOf('=');
    if (eq <= 0 || eq === p.length - 1) die(`input argument '${p}' is not of the form NAME=FILE.npy.`, 2);
    const name = p.slice(0, eq);
    if (name in feedsNpy) die(`input '${name}' is given twice.`, 2);
    feedsNpy[name] = p.slice(eq + 1);
  }
  if (!fs.existsSync(model)) die(`model file ${model} does not exist.`);

  const ort = loadOrt();
  // Errors are reported once, by this script; keep onnxruntime's own logger quiet.
  try { ort.env.logLevel = 'fatal'; } catch (_) { /* older versions */ }
  let session;
  try {
    session = await ort.InferenceSession.create(model, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      logSeverityLevel: 4,
    });
  } catch (e) {
    die(`onnxruntime cannot load ${model}: ${e.message}`);
  }

  const meta = {};
  for (const m of session.inputMetadata || []) meta[m.name] = m;
  for (const name of Object.keys(feedsNpy)) {
    if (!session.inputNames.includes(name)) {
      die(`model has no input named '${name}' (its inputs are: ${session.inputNames.join(', ')}).`);
    }
  }
  const feeds = {};
  for (const name of session.inputNames) {
    if (!(name in feedsNpy)) die(`no value given for model input '${name}'.`, 2);
    let a;
    try {
      a = readNpy(feedsNpy[name]);
    } catch (e) {
      die(e.message);
    }
    const m = meta[name];
    if (m && m.isTensor && m.type && m.type !== a.dtype) {
      die(`input '${name}' expects ${m.type} but ${feedsNpy[name]} holds ${a.dtype}.`);
    }
    if (m && m.isTensor && Array.isArray(m.shape)) {
      const ok = m.shape.length === a.shape.length
        && m.shape.every((d, i) => typeof d !== 'number' || d < 0 || d === a.shape[i]);
      if (!ok) {
        die(`input '${name}' expects shape [${m.shape.join(', ')}] but ${feedsNpy[name]} has shape [${a.shape.join(', ')}].`);
      }
    }
    feeds[name] = new ort.Tensor(a.dtype, a.data, a.shape);
  }

  let results;
  try {
    results = await session.run(feeds, { logSeverityLevel: 4 });
  } catch (e) {
    die(`onnxruntime failed to run ${model}: ${e.message}`);
  }

  try {
    fs.mkdirSync(outdir, { recursive: true });
  } catch (e) {
    die(`cannot create output folder ${outdir} (${e.code || e.message}).`);
  }
  const used = {};
  for (const name of session.outputNames) {
    const file = sanitize(name) + '.npy';
    if (used[file]) die(`outputs '${used[file]}' and '${name}' both sanitize to ${file}.`);
    used[file] = name;
  }
  for (const name of session.outputNames) {
    const t = results[name];
    if (!t || !TYPES.includes(t.type)) die(`output '${name}' has type ${t ? t.type : 'none'}, which cannot be written as .npy.`);
    try {
      writeNpy(path.join(outdir, sanitize(name) + '.npy'), t.type, t.dims.map(Number), t.data);
    } catch (e) {
      die(e.message);
    }
  }
  if (session.release) await session.release();
}

main(process.argv.slice(2)).catch((e) => die(e && e.message ? e.message : String(e)));
