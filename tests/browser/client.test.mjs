// The browser client's API-side rules, in Node (node --test), against a scripted fetch: which
// answers are retried and how long it waits (docs/clients.md, "What it retries"), and which
// resume records are followed or dropped. The browser tests (resume.mjs, demo.mjs) cover the
// storage side in Chromium.
import { test } from "node:test";
import assert from "node:assert/strict";
import { UpcommitClient, UpcommitError, crc64nvme, crc64nvmeParts, sha256Of } from "../../clients/js/upcommit.js";

// A fetch that answers from a script of (status, body, headers) or "drop" (no answer), and
// records each call with its time.
function scripted(answers) {
  const calls = [];
  globalThis.fetch = async (url, init) => {
    calls.push({ url: String(url), method: init.method, body: init.body, at: Date.now() });
    const a = answers.shift();
    if (!a) throw new Error(`unexpected call ${init.method} ${url}`);
    if (a === "drop") throw new TypeError("Failed to fetch");
    const [status, body, headers = {}] = a;
    return new Response(body === undefined ? null : JSON.stringify(body), { status, headers });
  };
  return calls;
}

const err = (code) => ({ error: { code, message: code } });
const handle = { id: "f".repeat(32), key: "media/images/x/a.png" };

function memoryStorage() {
  const m = new Map();
  return {
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
    get size() { return m.size; },
  };
}

test("CRC-64/NVME has the catalogue's check value and the parts' helper agrees with one pass", async () => {
  const check = Buffer.from(crc64nvme().update(new TextEncoder().encode("123456789")).base64(), "base64");
  assert.equal(check.toString("hex"), "ae8b14860a799888");
  const bytes = new Uint8Array(10_000).map((_, i) => (i * 7) & 0xff);
  const { whole, parts } = await crc64nvmeParts(new Blob([bytes]), 4096);
  assert.equal(whole.value, crc64nvme().update(bytes).base64());
  assert.deepEqual(parts, [0, 4096, 8192].map((s) => crc64nvme().update(bytes.subarray(s, s + 4096)).base64()));
});

test("commit is retried on no answer and on 503, waiting Retry-After, and answers the handle", async () => {
  const calls = scripted([
    "drop",
    [503, err("commit_in_progress"), { "Retry-After": "1" }],
    [200, handle],
  ]);
  const client = new UpcommitClient({ token: "t", storage: null, baseUrl: "http://api" });
  const got = await client.commit("tmp/k");
  assert.deepEqual(got, handle);
  assert.equal(calls.length, 3);
  assert.ok(calls.every((c) => c.method === "POST" && c.url === "http://api/v1/files"));
  assert.ok(calls[2].at - calls[1].at >= 950, `Retry-After: 1 was honoured (${calls[2].at - calls[1].at} ms)`);
});

test("commit is not retried on a 4xx: it would answer the same", async () => {
  for (const [status, code] of [[404, "object_not_uploaded"], [410, "upload_expired"], [422, "checksum_mismatch"], [401, "unauthorized"]]) {
    const calls = scripted([[status, err(code)]]);
    const client = new UpcommitClient({ token: "t", storage: null });
    await assert.rejects(client.commit("tmp/k"), (e) => e instanceof UpcommitError && e.code === code && e.status === status);
    assert.equal(calls.length, 1, code);
  }
});

test("commit stops retrying at commitTimeoutMs", async () => {
  const calls = scripted([[503, err("service_unavailable"), { "Retry-After": "5" }]]);
  const client = new UpcommitClient({ token: "t", storage: null, commitTimeoutMs: 2000 });
  await assert.rejects(client.commit("tmp/k"), (e) => e.code === "service_unavailable");
  assert.equal(calls.length, 1, "a 5 s wait would pass the 2 s deadline");
});

test("presign is repeated on rate_limited and 503, never after no answer", async () => {
  let calls = scripted([[429, err("rate_limited"), { "Retry-After": "1" }], [201, { upload_id: "u" }]]);
  const client = new UpcommitClient({ token: () => "fresh", storage: null });
  assert.deepEqual(await client.presign({ profile: "image" }), { upload_id: "u" });
  assert.equal(calls.length, 2);

  calls = scripted(["drop"]);
  await assert.rejects(client.presign({ profile: "image" }), (e) => e.code === "network");
  assert.equal(calls.length, 1, "the quota may have been charged: not repeated");

  calls = scripted([[429, err("quota_exceeded"), { "Retry-After": "3600" }]]);
  await assert.rejects(client.presign({ profile: "image" }), (e) => e.code === "quota_exceeded" && e.retryAfter === 3600);
  assert.equal(calls.length, 1);
});

test("the token function is asked before each call", async () => {
  let n = 0;
  const seen = [];
  globalThis.fetch = async (_url, init) => {
    seen.push(init.headers.Authorization);
    return new Response(JSON.stringify(seen.length === 1 ? err("service_unavailable") : handle), {
      status: seen.length === 1 ? 503 : 200,
      headers: { "Retry-After": "1" },
    });
  };
  const client = new UpcommitClient({ token: async () => `t${(n += 1)}`, storage: null });
  await client.commit("tmp/k");
  assert.deepEqual(seen, ["Bearer t1", "Bearer t2"]);
});

const file = () => new File([new Uint8Array(12).fill(1)], "a.png", { type: "image/png", lastModified: 1000 });

// A resume record as the client writes one for `f`: its name and the checksum its upload
// declared (SHA-256 for one request, the whole file's CRC64NVME for multipart).
async function recordOf(f, fields) {
  const checksum = fields.method === "MULTIPART" ? (await crc64nvmeParts(f, fields.part_size ?? 5)).whole : await sha256Of(f);
  return { v: 1, size: f.size, filename: f.name, checksum, saved_at: 0, ...fields };
}

test("a recorded multipart upload the server no longer knows is forgotten and started afresh", async () => {
  const storage = memoryStorage();
  const client = new UpcommitClient({ token: "t", storage });
  const f = file();
  client.remember(f, "image", await recordOf(f, { upload_id: "gone", key: "tmp/k", method: "MULTIPART", part_size: 5, part_count: 3 }));
  const calls = scripted([
    [404, err("upload_not_found")],
    [400, err("content_type_not_allowed")], // the fresh presign; refused to end the test here
  ]);
  await assert.rejects(client.upload(f, { profile: "image", method: "MULTIPART" }), (e) => e.code === "content_type_not_allowed");
  assert.deepEqual(calls.map((c) => `${c.method} ${c.url}`), ["GET /v1/uploads/gone/parts?after=0", "POST /v1/uploads"]);
  assert.equal(client.resumable(f, "image"), null, "the record was dropped");
});

test("a recorded upload already completed is only committed; a single PUT's record only commits", async () => {
  const storage = memoryStorage();
  const client = new UpcommitClient({ token: "t", storage });
  const f = file();
  client.remember(f, "image", await recordOf(f, { upload_id: "u1", key: "tmp/k1", method: "MULTIPART", part_size: 5, part_count: 3 }));
  let calls = scripted([
    [200, { upload_id: "u1", state: "completed", part_size: 5, part_count: 3, parts: [], expires_at: "x" }],
    [200, handle],
  ]);
  const progress = [];
  assert.deepEqual(await client.upload(f, { profile: "image", onProgress: (p) => progress.push(p) }), handle);
  assert.deepEqual(calls.map((c) => `${c.method} ${c.url}`), ["GET /v1/uploads/u1/parts?after=0", "POST /v1/files"]);
  assert.equal(JSON.parse(calls[1].body).key, "tmp/k1");
  assert.deepEqual(progress.at(-1), { loaded: 12, total: 12 });
  assert.equal(storage.size, 0, "dropped after the commit");

  client.remember(f, "image", await recordOf(f, { upload_id: "u2", key: "tmp/k2", method: "PUT", stored: true }));
  calls = scripted([[200, handle]]);
  assert.deepEqual(await client.upload(f, { profile: "image" }), handle);
  assert.deepEqual(calls.map((c) => `${c.method} ${c.url}`), ["POST /v1/files"]);
  assert.equal(storage.size, 0);
});

test("records are per profile and per file (name, size, lastModified)", async () => {
  const client = new UpcommitClient({ token: "t", storage: memoryStorage() });
  const f = file();
  client.remember(f, "image", await recordOf(f, { upload_id: "u", key: "k", method: "MULTIPART", size: 12 }));
  assert.ok(client.resumable(f, "image"));
  assert.equal(client.resumable(f, "recording"), null);
  assert.equal(client.resumable(new File([new Uint8Array(12)], "a.png", { lastModified: 2000 }), "image"), null);
  assert.equal(client.resumable(new File([new Uint8Array(13)], "a.png", { lastModified: 1000 }), "image"), null);
  assert.equal(client.resumable(new File([new Uint8Array(12)], "b.png", { lastModified: 1000 }), "image"), null);
});

test("an abort before the start rejects with code aborted and calls nothing", async () => {
  const calls = scripted([]);
  const controller = new AbortController();
  controller.abort();
  const client = new UpcommitClient({ token: "t", storage: null });
  await assert.rejects(client.upload(file(), { profile: "image", signal: controller.signal }), (e) => e.code === "aborted");
  assert.equal(calls.length, 0);
});

test("a recorded upload whose commit is refused for good is not resumed into again", async () => {
  const storage = memoryStorage();
  const client = new UpcommitClient({ token: "t", storage });
  const f = file();
  client.remember(f, "image", await recordOf(f, { upload_id: "u", key: "tmp/k", method: "PUT", stored: true }));
  const calls = scripted([[422, err("checksum_mismatch")]]);
  await assert.rejects(client.upload(f, { profile: "image" }), (e) => e.code === "checksum_mismatch");
  assert.equal(calls.length, 1);
  assert.equal(storage.size, 0, "the record was dropped");
});

test("a completion refused for good (422) aborts the upload on the server and drops the record", async () => {
  const storage = memoryStorage();
  const client = new UpcommitClient({ token: "t", storage });
  const f = file();
  client.remember(f, "image", await recordOf(f, { upload_id: "u", key: "tmp/k", method: "MULTIPART", part_size: 5, part_count: 3 }));
  const parts = [1, 2, 3].map((n) => ({ part_number: n, etag: `"e${n}"`, size: n === 3 ? 2 : 5 }));
  const calls = scripted([
    [200, { upload_id: "u", state: "open", part_size: 5, part_count: 3, parts, expires_at: "x" }],
    [422, err("part_etag_mismatch")],
    [204],
  ]);
  await assert.rejects(client.upload(f, { profile: "image" }), (e) => e.code === "part_etag_mismatch");
  assert.deepEqual(calls.map((c) => `${c.method} ${c.url}`),
    ["GET /v1/uploads/u/parts?after=0", "POST /v1/uploads/u/complete", "DELETE /v1/uploads/u"]);
  assert.deepEqual(JSON.parse(calls[1].body).parts.map((p) => p.etag), ['"e1"', '"e2"', '"e3"'],
    "every part S3 holds, none sent again");
  assert.equal(storage.size, 0);
});

test("a record is resumed only for the bytes it was made for, and never without a checksum", async () => {
  const storage = memoryStorage();
  const client = new UpcommitClient({ token: "t", storage });
  const f = file();
  // Same name, size and date, other bytes: the stored upload is not this file's.
  const other = new File([new Uint8Array(12).fill(2)], "a.png", { type: "image/png", lastModified: 1000 });
  client.remember(f, "image", await recordOf(other, { upload_id: "u", key: "tmp/theirs", method: "PUT", stored: true }));
  let calls = scripted([[400, err("content_type_not_allowed")]]); // the fresh presign, refused to end here
  await assert.rejects(client.upload(f, { profile: "image" }), (e) => e.code === "content_type_not_allowed");
  assert.deepEqual(calls.map((c) => `${c.method} ${c.url}`), ["POST /v1/uploads"], "no commit of the other bytes");
  assert.equal(storage.size, 0, "the record was dropped");
  // A record without a checksum (nothing to prove it by) is dropped, not resumed.
  client.remember(f, "image", { ...(await recordOf(f, { upload_id: "u", key: "tmp/k", method: "PUT", stored: true })), checksum: null });
  calls = scripted([[400, err("content_type_not_allowed")]]);
  await assert.rejects(client.upload(f, { profile: "image" }), (e) => e.code === "content_type_not_allowed");
  assert.deepEqual(calls.map((c) => `${c.method} ${c.url}`), ["POST /v1/uploads"]);
  // Nor is one of another filename.
  client.remember(f, "image", await recordOf(f, { upload_id: "u", key: "tmp/k", method: "PUT", stored: true }));
  calls = scripted([[400, err("content_type_not_allowed")]]);
  await assert.rejects(client.upload(f, { profile: "image", filename: "renamed.png" }), (e) => e.code === "content_type_not_allowed");
  assert.deepEqual(calls.map((c) => `${c.method} ${c.url}`), ["POST /v1/uploads"]);
});

test("variantUrl waits out render_busy (Retry-After) and answers the rendition; a 404 is not retried", async () => {
  const rendition = { variant: "thumb", url: "https://s3/cache/x", width: 200, height: 200, content_type: "image/jpeg", size: 9, expires_in: 300, cached: false };
  const calls = scripted([
    [503, err("render_busy"), { "Retry-After": "1" }],
    [200, rendition],
  ]);
  const client = new UpcommitClient({ token: "t", storage: null, baseUrl: "http://api" });
  const got = await client.variantUrl("f".repeat(32), "thumb");
  assert.deepEqual(got, rendition);
  assert.equal(calls.length, 2);
  assert.ok(calls.every((c) => c.method === "GET" && c.url === `http://api/v1/files/${"f".repeat(32)}/variants/thumb`));
  assert.ok(calls[1].at - calls[0].at >= 950, "Retry-After: 1 was honoured");

  scripted([[404, err("variant_not_found")]]);
  await assert.rejects(client.variantUrl("f".repeat(32), "poster"), (e) => e instanceof UpcommitError && e.code === "variant_not_found");

  // Past `retries`, the 503 is the caller's.
  const few = new UpcommitClient({ token: "t", storage: null, baseUrl: "http://api", retries: 1, retryBaseMs: 1 });
  const busy = [503, err("render_busy"), { "Retry-After": "1" }];
  const tried = scripted([busy, busy]);
  await assert.rejects(few.variantUrl("a".repeat(32), "thumb"), (e) => e.code === "render_busy");
  assert.equal(tried.length, 2);
});

test("variantUrls sends 100 ids a call, in order, and answers every entry in the order asked", async () => {
  const ids = Array.from({ length: 250 }, (_, i) => i.toString(16).padStart(32, "0"));
  const answer = (slice) => [200, { variant: "thumb", files: slice.map((id) => ({ id, status: 404, error: { code: "file_not_found", message: "x" } })) }];
  const calls = scripted([answer(ids.slice(0, 100)), answer(ids.slice(100, 200)), answer(ids.slice(200))]);
  const client = new UpcommitClient({ token: "t", storage: null, baseUrl: "http://api" });
  const got = await client.variantUrls("thumb", ids);
  assert.deepEqual(got.map((e) => e.id), ids);
  assert.equal(calls.length, 3);
  assert.deepEqual(calls.map((c) => JSON.parse(c.body).ids.length), [100, 100, 50]);
  assert.ok(calls.every((c) => c.method === "POST" && c.url === "http://api/v1/files/variants/thumb"));
});
