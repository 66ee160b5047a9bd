// sharp's benchmark task on one input, `inflight` renders at a time for `secs` seconds, each
// render on one libvips thread (sharp.concurrency(1)), the operation cache off; or, with
// `make`, writes the synthetic inputs. Prints one JSON line. Run by bench/render_vs_sharp.sh.
const sharp = require("sharp");
const fs = require("fs");
const [mode, ...args] = process.argv.slice(2);
sharp.cache(false);
if (mode === "make") {
  const [dir] = args;
  (async () => {
    // Noisy: gaussian noise, the case where entropy decoding dominates (about 2.7 MB).
    await sharp({ create: { width: 2725, height: 2225, channels: 3, noise: { type: "gaussian", mean: 128, sigma: 36 } } })
      .jpeg({ quality: 80 }).toFile(`${dir}/noisy.jpg`);
    // Photo-like: smooth gradients, a ripple and a little grain (a few hundred KB).
    const [w, h] = [2725, 2225];
    const raw = Buffer.alloc(w * h * 3);
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff - 0.5) * 12;
    for (let y = 0; y < h; y += 1) {
      for (let x = 0; x < w; x += 1) {
        const o = (y * w + x) * 3;
        const ripple = 40 * Math.sin(x / 90) * Math.cos(y / 70);
        raw[o] = Math.max(0, Math.min(255, 90 + (x / w) * 120 + ripple + rnd()));
        raw[o + 1] = Math.max(0, Math.min(255, 60 + (y / h) * 150 - ripple / 2 + rnd()));
        raw[o + 2] = Math.max(0, Math.min(255, 180 - (x / w) * 90 + rnd()));
      }
    }
    await sharp(raw, { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 85 }).toFile(`${dir}/photo.jpg`);
  })();
} else {
  const [file, inflight, secs, out] = [args[0], +args[1], +args[2], args[3]];
  sharp.concurrency(1);
  const input = fs.readFileSync(file);
  const render = () => sharp(input).resize(720, 588, { kernel: sharp.kernel.lanczos3 }).jpeg({ quality: 80 }).toBuffer();
  (async () => {
    const end = Date.now() + secs * 1000;
    let n = 0;
    let last = null;
    const t0 = Date.now();
    await Promise.all(Array.from({ length: inflight }, async () => {
      while (Date.now() < end) { last = await render(); n += 1; }
    }));
    if (out) fs.writeFileSync(out, last);
    const v = sharp.versions;
    console.log(JSON.stringify({ tool: `sharp ${v.sharp} (libvips ${v.vips})`, threads: inflight, renders_per_sec: +(n / ((Date.now() - t0) / 1000)).toFixed(1), output_bytes: last.length }));
  })();
}
