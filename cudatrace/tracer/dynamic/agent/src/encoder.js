// Hooking writes ~10 of these per entry point, thousands per process: two pointer operations each, not 24.
function le64(bytes, value) {
  const p = value instanceof NativePointer ? value : ptr(value);
  const lo = p.toUInt32(), hi = p.shr(32).toUInt32();
  bytes.push(lo & 0xff, (lo >>> 8) & 0xff, (lo >>> 16) & 0xff, lo >>> 24, hi & 0xff, (hi >>> 8) & 0xff, (hi >>> 16) & 0xff,
    hi >>> 24);
}

function le32(bytes, v) {
  bytes.push(v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff);
}
