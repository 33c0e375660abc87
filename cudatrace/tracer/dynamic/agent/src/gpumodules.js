// GPU code handed to the driver: what each module load carries (PTX text, a cubin, a fatbin: which kinds for
// which architectures) and the kernel lookups made in modules that carry no PTX. ZLUDA recompiles PTX only: a
// module of SASS alone loads under it, and every kernel looked up in it is "named symbol not found".
// A few hundred loads and lookups at start-up (PyTorch: one load per fatbin, one lookup per kernel used), hooked
// in JavaScript like cuGetProcAddress (specials.js).

const MODULE_LOADS = ['cuModuleLoadData', 'cuModuleLoadDataEx', 'cuModuleLoadFatBinary', 'cuLibraryLoadData'];
// Loads of a file by its path: the host reads the file (session.py) and says what it carries; the agent keeps the
// path and counts every kernel lookup in such a module, since only the host knows whether it has PTX.
const FILE_LOADS = ['cuModuleLoad', 'cuLibraryLoadFromFile'];
const KERNEL_LOOKUPS = ['cuModuleGetFunction', 'cuLibraryGetKernel']; // (out, module or library, name)
const LIBRARY_MODULE = 'cuLibraryGetModule'; // (out module, library): a library's module carries what it carries
const FATBIN_MAGIC = 0xba55ed50;
const FATBIN_WRAPPER_MAGIC = 0x466243b1; // __fatBinC_Wrapper_t: magic, version, then the fatbin's address
const ELF_MAGIC = 0x464c457f;
const MAX_FATBIN_ENTRIES = 4096;
const MAX_NO_PTX_HANDLES = 100000;
const MAX_FILE_RECORDS = 4096; // distinct (entry point, path, caller): a program loading a file per kernel is bounded
const PTX_HEAD = 4096;

// The kinds and architectures of one image: {kind: 'fatbin'|'cubin'|'ptx'|'unknown'|'unreadable', ptx, sass}.
function imageFacts(p) {
  const f = { kind: 'unknown', ptx: new Set(), sass: new Set() };
  try {
    let magic = p.readU32();
    if (magic === FATBIN_WRAPPER_MAGIC) {
      p = p.add(8).readPointer();
      magic = p.readU32();
    }
    if (magic === FATBIN_MAGIC) {
      f.kind = 'fatbin';
      const headerSize = p.add(6).readU16();
      const end = headerSize + p.add(8).readU64().toNumber();
      let at = headerSize;
      for (let n = 0; at + 32 <= end && n < MAX_FATBIN_ENTRIES; n++) {
        const q = p.add(at);
        const kind = q.readU16(), entryHeader = q.add(4).readU32(), size = q.add(8).readU64().toNumber();
        const arch = 'sm_' + q.add(28).readU32();
        if (kind === 1) f.ptx.add(arch);
        else if (kind === 2) f.sass.add(arch);
        if (entryHeader === 0) break;
        at += entryHeader + size;
      }
    } else if (magic === ELF_MAGIC) {
      f.kind = 'cubin';
      const sm = cubinSm(p);
      f.sass.add(sm === null ? 'sm_?' : 'sm_' + sm);
    } else {
      const target = ptxTarget(p);
      if (target !== null) {
        f.kind = 'ptx';
        f.ptx.add(target);
      }
    }
  } catch (_) {
    f.kind = 'unreadable';
  }
  return f;
}

// The SM number in a cubin's e_flags (as fatbin.py's _cubin_sm reads it), or null.
function cubinSm(p) {
  const osabi = p.add(7).readU8();
  if (osabi !== 0x33 && osabi !== 0x41) return null;
  const flags = p.add(p.add(4).readU8() === 2 ? 48 : 36).readU32();
  return p.add(8).readU8() >= 8 ? (flags >>> 8) & 0xff : flags & 0xff;
}

// A PTX text's `.target` (sm_NN), or null when the image is no PTX. Read from its first bytes only; a text
// shorter than that may end just before unreadable memory, so the read falls back to the NUL.
function ptxTarget(p) {
  let head;
  try {
    head = p.readCString(PTX_HEAD);
  } catch (_) {
    head = p.readCString();
  }
  if (head === null || head.indexOf('.version') < 0) return null;
  const m = /\.target\s+(sm_\d+[a-z]?)/.exec(head);
  return m ? m[1] : 'sm_?';
}

function hookModuleLoad(address, name, e) {
  Interceptor.attach(address, {
    onEnter(args) {
      this.t0 = S.nowNs();
      this.out = args[0];
      this.image = args[1];
    },
    onLeave(retval) {
      const status = retval.toInt32();
      noteModule(name, this.image, this.out, status, callerName(this.returnAddress));
      countJs(e, this.t0, status, this.returnAddress);
    }
  });
}

// `caller`: the module that asked for the load (libcudart for a program's own kernels, cuBLAS for its own).
function noteModule(via, image, out, status, caller) {
  const f = imageFacts(image);
  const m = Process.findModuleByAddress(image);
  const from = m ? m.name : '[memory]'; // made at run time: NVRTC, nvJitLink, a file read by the program
  const ptx = Array.from(f.ptx).sort(), sass = Array.from(f.sass).sort();
  const key = [via, from, caller, f.kind, ptx.join(','), sass.join(',')].join('|');
  const r = moduleRecord(key, { via, from, caller, kind: f.kind, ptx, sass }, Infinity);
  countLoad(r, out, status, ptx.length === 0 && sass.length > 0);
}

// The record of the loads alike in `key`, made from `fields` the first time; null once `bound` records exist.
function moduleRecord(key, fields, bound) {
  let r = S.gpuModules.get(key);
  if (r === undefined) {
    if (S.gpuModules.size >= bound) return null;
    r = Object.assign(fields, { loads: 0, failed: 0, lookups: 0, kernel: null });
    S.gpuModules.set(key, r);
  }
  return r;
}

// One load counted in `r`; with `watch`, the handle it wrote at `out` is watched for kernel lookups.
function countLoad(r, out, status, watch) {
  if (r === null) return;
  r.loads++;
  if (status !== 0) r.failed++;
  else if (watch) watchHandle(out, r);
}

function watchHandle(out, r) {
  if (S.noPtxHandles.size >= MAX_NO_PTX_HANDLES) return;
  try {
    S.noPtxHandles.set(out.readPointer().toString(), r);
  } catch (_) { /* no handle written */ }
}

// The record whose module or library `handle` is, when it is watched; else null.
function watchedRecord(handle) {
  if (S.noPtxHandles.size === 0) return null;
  const r = S.noPtxHandles.get(handle.toString());
  return r === undefined ? null : r;
}

function hookFileLoad(address, name, e) {
  Interceptor.attach(address, {
    onEnter(args) {
      this.t0 = S.nowNs();
      this.out = args[0];
      try { this.path = args[1].isNull() ? null : args[1].readUtf8String(); } catch (_) { this.path = null; }
    },
    onLeave(retval) {
      const status = retval.toInt32();
      if (this.path !== null) noteFile(name, this.path, this.out, status, callerName(this.returnAddress));
      countJs(e, this.t0, status, this.returnAddress);
    }
  });
}

function noteFile(via, path, out, status, caller) {
  const fields = { via, from: path, caller, kind: 'file', ptx: [], sass: [] };
  countLoad(moduleRecord([via, 'file', path, caller].join('|'), fields, MAX_FILE_RECORDS), out, status, true);
}

function hookKernelLookup(address, name, e) {
  Interceptor.attach(address, {
    onEnter(args) {
      this.t0 = S.nowNs();
      this.r = watchedRecord(args[1]);
      this.kernel = null;
      if (this.r !== null && this.r.kernel === null) {
        try { this.kernel = args[2].readCString(); } catch (_) { this.kernel = null; }
      }
    },
    onLeave(retval) {
      if (this.r !== null) {
        this.r.lookups++;
        if (this.r.kernel === null && this.kernel !== null) this.r.kernel = this.kernel;
      }
      countJs(e, this.t0, retval.toInt32(), this.returnAddress);
    }
  });
}

function hookLibraryModule(address, e) {
  Interceptor.attach(address, {
    onEnter(args) {
      this.t0 = S.nowNs();
      this.out = args[0];
      this.r = watchedRecord(args[1]);
    },
    onLeave(retval) {
      const status = retval.toInt32();
      if (this.r !== null && status === 0) watchHandle(this.out, this.r);
      countJs(e, this.t0, status, this.returnAddress);
    }
  });
}

// hookSpecial's part for GPU modules: true when `name` is one of them (and it is now hooked).
function hookGpuModuleSpecial(address, name, e) {
  if (MODULE_LOADS.indexOf(name) >= 0) hookModuleLoad(address, name, e);
  else if (FILE_LOADS.indexOf(name) >= 0) hookFileLoad(address, name, e);
  else if (KERNEL_LOOKUPS.indexOf(name) >= 0) hookKernelLookup(address, name, e);
  else if (name === LIBRARY_MODULE) hookLibraryModule(address, e);
  else return false;
  return true;
}
