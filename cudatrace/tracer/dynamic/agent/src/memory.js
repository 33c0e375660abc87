// Memory of the agent's own: mappings that outlive the script (Frida frees what Memory.alloc gave when the host
// detaches, and a forked child keeps the parent's mappings), near a library or anywhere.

const IS_X64 = Process.arch === 'x64';
const PAGE = Process.pageSize;

// A pointer's address as a number: exact, user-space addresses are below 2^47. Three pointer operations; the
// encoder then works on plain numbers.
function num(p) {
  return p.toUInt32() + p.shr(32).toUInt32() * 4294967296;
}

function u64(p) {
  return p.readU64().toNumber();
}

// libc's mmap (Linux), made once: the fork state, the shared files and the agent's own memory all map with it.
function libcMmap() {
  if (S.mmapFn === null) {
    S.mmapFn = new NativeFunction(Module.getGlobalExportByName('mmap'), 'pointer',
      ['pointer', 'size_t', 'int', 'int', 'int', 'int64']);
  }
  return S.mmapFn;
}

// Anonymous memory of the agent's own, which Frida never frees: it stays valid in a forked child.
function ownMap(size) {
  if (Process.platform !== 'linux') return null; // Windows has no fork: callers fall back to Memory.alloc
  const p = libcMmap()(NULL, size, 7 /* PROT_READ|WRITE|EXEC */, 0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);
  return p.equals(ptr(-1)) ? null : p;
}

// Code and data the thunks use must outlive the script: when the host detaches (--pid, Ctrl-C) Frida frees what
// Memory.alloc gave, while other threads may still be running in a thunk, and functions patched directly keep
// jumping there. Thunks must be within branch range (rel32) of their library: on Linux they are mapped with mmap
// at free addresses tried outward from the library, elsewhere (or when none is free) by Memory.alloc.
function nearMap(size, m, maxDistance) {
  if (Process.platform === 'linux') {
    const mmap = libcMmap();
    const munmap = new NativeFunction(Module.getGlobalExportByName('munmap'), 'int', ['pointer', 'size_t']);
    const lo = num(m.base), hi = lo + m.size, step = 0x100000;
    for (let k = 1; k <= 1536; k++) {
      for (const hint of [lo - k * step - size, hi + k * step]) {
        if (hint < 0x100000) continue;
        const aligned = hint - (hint % step);
        // MAP_FIXED_NOREPLACE: this address or nothing (older kernels take it as a hint; the check below holds)
        const p = mmap(ptr(aligned), size, 7, 0x22 | 0x100000, -1, 0);
        if (p.equals(ptr(-1))) continue;
        const a = num(p);
        if (Math.abs(a - lo) < maxDistance && Math.abs(a + size - lo) < maxDistance) return p;
        munmap(p, size);
      }
    }
  }
  let p;
  try {
    p = Memory.alloc(size, { near: m.base, maxDistance });
  } catch (err) {
    // Nothing free within branch range (attached late, CUDA has reserved the address space around the library):
    // on Linux the thunks go anywhere and the prologues get a 14-byte absolute jump instead (farJump).
    const far = Process.platform === 'linux' && IS_X64 ? ownMap(size) : null;
    if (far === null) throw err;
    far.far = true;
    return far;
  }
  S.keep.push(p);
  Memory.protect(p, size, 'rwx');
  p.lent = true; // freed with the script, also in a forked child: its patches are undone there (rememberPatch)
  return p;
}

function lastingAlloc(size) {
  const p = ownMap(size);
  if (p !== null) return p;
  const q = Memory.alloc(size);
  S.keep.push(q);
  return q;
}

// Frida converts a plain array element by element (~1 µs a byte); a typed array's buffer goes in one copy. The
// typed array is filled by set(): built from the array by its constructor it cost 7 µs for 60 bytes, set() 2 µs
// (writeBytes runs ~5 times an entry point).
function writeBytes(at, bytes) {
  const b = new Uint8Array(bytes.length);
  b.set(bytes);
  at.writeByteArray(b.buffer);
}
