'use strict';
// Minimal .npy reader/writer (format versions 1, 2 and 3; C order; little
// endian). Arrays are { dtype, shape, data } where dtype is an onnxruntime
// tensor type name and data the matching typed array (bool -> Uint8Array,
// float16 -> Uint16Array holding the raw bits).

const fs = require('fs');
const path = require('path');

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

// numpy descr (without byte-order char) -> [ort type, TypedArray, bytes]
const BY_DESCR = {
  f4: ['float32', Float32Array, 4],
  f8: ['float64', Float64Array, 8],
  f2: ['float16', Uint16Array, 2],
  i8: ['int64', BigInt64Array, 8],
  i4: ['int32', Int32Array, 4],
  i2: ['int16', Int16Array, 2],
  i1: ['int8', Int8Array, 1],
  u8: ['uint64', BigUint64Array, 8],
  u4: ['uint32', Uint32Array, 4],
  u2: ['uint16', Uint16Array, 2],
  u1: ['uint8', Uint8Array, 1],
  b1: ['bool', Uint8Array, 1],
};
const BY_TYPE = {};
for (const [d, [t, ctor, n]] of Object.entries(BY_DESCR)) {
  BY_TYPE[t] = { descr: (n === 1 ? '|' : '<') + d, ctor, bytes: n };
}

function fail(msg) {
  const e = new Error(msg);
  e.npy = true;
  throw e;
}

function parseHeader(text, file) {
  const descr = /['"]descr['"]\s*:\s*['"]([^'"]+)['"]/.exec(text);
  const fortran = /['"]fortran_order['"]\s*:\s*(True|False)/.exec(text);
  const shape = /['"]shape['"]\s*:\s*\(([^)]*)\)/.exec(text);
  if (!descr || !fortran || !shape) fail(`${file} has a malformed .npy header.`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length)
    .map((s) => {
      const v = Number(s.replace(/L$/, ''));
      if (!Number.isInteger(v) || v < 0) fail(`${file} has a malformed shape in its .npy header.`);
      return v;
    });
  return { descr: descr[1], fortran: fortran[1] === 'True', shape: dims };
}

function readNpy(file) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    fail(`cannot read ${file} (${e.code || e.message}).`);
  }
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) fail(`${file} is not a .npy file.`);
  const major = buf[6];
  let hlen;
  let off;
  if (major === 1) {
    hlen = buf.readUInt16LE(8);
    off = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) fail(`${file} is truncated.`);
    hlen = buf.readUInt32LE(8);
    off = 12;
  } else {
    fail(`${file} uses .npy format version ${major}, which is not supported.`);
  }
  if (off + hlen > buf.length) fail(`${file} is truncated.`);
  const hdr = parseHeader(buf.toString(major === 3 ? 'utf8' : 'latin1', off, off + hlen), file);
  if (hdr.fortran) fail(`${file} is in Fortran order; only C order is supported.`);
  let d = hdr.descr;
  const order = d[0];
  if (order === '<' || order === '|' || order === '=') d = d.slice(1);
  else if (order === '>') {
    if (!/^[iub]1$/.test(d.slice(1))) fail(`${file} is big-endian, which is not supported.`);
    d = d.slice(1);
  }
  if (d === '?') d = 'b1';
  const info = BY_DESCR[d];
  if (!info) fail(`${file} has dtype '${hdr.descr}', which is not supported.`);
  const [type, Ctor, bytes] = info;
  const count = hdr.shape.reduce((a, b) => a * b, 1);
  const start = off + hlen;
  if (buf.length - start < count * bytes) fail(`${file} holds fewer bytes than its shape needs.`);
  // Copy into a fresh, aligned ArrayBuffer.
  const ab = new ArrayBuffer(count * bytes);
  new Uint8Array(ab).set(buf.subarray(start, start + count * bytes));
  return { dtype: type, shape: hdr.shape, data: new Ctor(ab) };
}

function encodeNpy(dtype, shape, data) {
  const info = BY_TYPE[dtype];
  if (!info) fail(`cannot write a .npy file for tensor type '${dtype}'.`);
  const count = shape.reduce((a, b) => a * b, 1);
  const raw = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (raw.length !== count * info.bytes) fail(`tensor data does not match its shape [${shape.join(', ')}].`);
  let shapeStr;
  if (shape.length === 0) shapeStr = '()';
  else if (shape.length === 1) shapeStr = `(${shape[0]},)`;
  else shapeStr = `(${shape.join(', ')})`;
  let header = `{'descr': '${info.descr}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  let major = 1;
  let pre = 10;
  if (header.length + 1 + pre > 65535) {
    major = 2;
    pre = 12;
  }
  const total = Math.ceil((pre + header.length + 1) / 64) * 64;
  header = header + ' '.repeat(total - pre - header.length - 1) + '\n';
  const head = Buffer.alloc(pre);
  MAGIC.copy(head, 0);
  head[6] = major;
  head[7] = 0;
  if (major === 1) head.writeUInt16LE(header.length, 8);
  else head.writeUInt32LE(header.length, 8);
  return Buffer.concat([head, Buffer.from(header, 'latin1'), raw]);
}

// Writes through a temporary name then renames, so readers never see half a file.
function writeNpy(file, dtype, shape, data) {
  const bytes = encodeNpy(dtype, shape, data);
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp.${process.pid}`);
  try {
    fs.writeFileSync(tmp, bytes);
    fs.renameSync(tmp, file);
  } catch (e) {
    try { fs.unlinkSync(tmp); } catch (_) { /* nothing to clean */ }
    fail(`cannot write ${file} (${e.code || e.message}).`);
  }
}

module.exports = { readNpy, writeNpy, encodeNpy, TYPES: Object.keys(BY_TYPE) };
