// Drives Debian's chromium (headless, off the network) through upcommit's admin console:
//   node console.mjs BASE_URL ADMIN_TOKEN USER_TOKEN SCREENSHOT_DIR FIXTURE_JSON
// FIXTURE_JSON names what the Rust side made through the real API: {owner, linked (a file with
// a link), unlinked (a file hygiene unlinked, with a copy), copy (that copy, unlinked too),
// endpoint (a webhook whose deliveries fail)}.
// Each page is compared with what the admin API answers to the same token (fetched here, from
// Node); each action is clicked and its answer and the changed numbers checked; a user token
// and a bad token see nothing but the error; each job summary (every job's last run, every run
// of the history, a run's page, the dry run's answer) shows the API's headline numbers first,
// no JSON, and every other field folded (an unknown job's and unknown fields too, the error
// first); every page is read at 375 px (no horizontal
// scroll) and at desktop width, with full-page screenshots; sign-in, the navigation and an
// action are reached by keyboard alone. Prints {"restored", "new_copy", "dry_run", "disabled",
// "screenshots"} for the Rust side to check in the catalog; exits 1 with the reason on the
// first failed expectation.
import { chromium } from "playwright-core";
import { mkdirSync, rmSync, statSync } from "node:fs";
import path from "node:path";

const [base, admin, user, shots, fixtureText] = process.argv.slice(2);
if (!base || !admin || !user || !shots || !fixtureText) {
  console.error("usage: node console.mjs BASE_URL ADMIN_TOKEN USER_TOKEN SCREENSHOT_DIR FIXTURE_JSON");
  process.exit(2);
}
const fx = JSON.parse(fixtureText);

function expect(cond, what) {
  if (!cond) throw new Error(`expectation failed: ${what}`);
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// The admin API, asked directly with the same token the page uses.
async function api(method, p, body, token = admin) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(base + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}
async function get(p) {
  const r = await api("GET", p);
  expect(r.status === 200, `GET ${p}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

// The page's formats, from their definitions: bytes in IEC units with one decimal (plain bytes
// below 1 KiB), counts with thousands separators, the cost with two decimals.
function bytes(n) {
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  if (n < 1024) return `${n} B`;
  let k = 1;
  while (k < units.length && n >= 1024 ** (k + 1)) k += 1;
  return `${(n / 1024 ** k).toFixed(1)} ${units[k - 1]}`;
}
expect(bytes(0) === "0 B" && bytes(1023) === "1023 B" && bytes(1536) === "1.5 KiB" && bytes(5 * 1024 * 1024) === "5.0 MiB",
  "the test's byte format");
const count = (n) => n.toLocaleString("en-US");

const screenshots = [];
async function shot(page, name) {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  screenshots.push(file);
}

// Waits for the page `name` to have rendered (every section answered), after `act`.
async function settle(page, name, act) {
  const before = await page.evaluate(() => document.body.dataset.render || "0");
  await act();
  await page.waitForFunction(
    ([n, b]) => document.body.dataset.page === n && document.body.dataset.state === "ready" && document.body.dataset.render !== b,
    [name, before],
    { timeout: 30000 },
  );
  const failed = await page.$$eval("[data-section][data-failed=true]", (s) => s.map((x) => `${x.dataset.section}: ${x.textContent}`));
  expect(failed.length === 0, `${name}: every section rendered: ${failed.join(" | ")}`);
}
const go = (page, hash, name) => settle(page, name, () => page.evaluate((h) => { location.hash = h; }, hash));
// To a page that is expected to fail (an id that is none): drawn, whatever its sections say.
async function goFailing(page, hash, name) {
  const before = await page.evaluate(() => document.body.dataset.render || "0");
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction(
    ([n, b]) => document.body.dataset.page === n && document.body.dataset.render !== b && document.body.dataset.state !== "loading",
    [name, before],
    { timeout: 30000 },
  );
}

const texts = (page, selector) => page.$$eval(selector, (els) => els.map((e) => e.textContent.trim()));
const attrs = (page, selector, attr) => page.$$eval(selector, (els, a) => els.map((e) => e.getAttribute(a)), attr);

// The rows of a chart: {name: shown value}.
async function chart(page, key) {
  return page.$$eval(`[data-chart="${key}"] g[data-name]`, (gs) =>
    Object.fromEntries(gs.map((g) => [g.getAttribute("data-name"), g.querySelector("text.value").textContent])));
}

// Does `act` (a click, a key) and waits for the page to show the action's answer (a new box of
// `what`) and to have read again what the action changes; reads the answer.
async function acted(page, what, act) {
  const boxes = `.answer[data-action="${what}"]`;
  const n = await page.$$eval(boxes, (b) => b.length);
  await act();
  await page.waitForFunction(
    ([sel, k]) => document.querySelectorAll(sel).length > k && document.body.dataset.state === "ready",
    [boxes, n],
    { timeout: 60000 },
  );
  const box = page.locator(boxes).first();
  return {
    status: Number(await box.getAttribute("data-status")),
    code: (await box.locator("[data-code]").count()) ? await box.locator("[data-code]").textContent() : null,
    json: (await box.locator("pre").count()) ? JSON.parse(await box.locator("pre").textContent()) : null,
  };
}

async function endpointCounts(page, id) {
  const row = page.locator(`tr[data-endpoint="${id}"]`);
  const read = async (k) => Number((await row.locator(`[data-count=${k}]`).textContent()).replace(/,/g, ""));
  return { pending: await read("pending"), failed: await read("failed"), delivered: await read("delivered") };
}

// ---- job summaries ------------------------------------------------------------------------
// What each known job's summary must put first (the rest is folded).
const HEADLINE = {
  sweep: ["deleted_versions", "deleted_bytes", "skipped_keys", "failed_versions"],
  hygiene: ["unlinked", "archived", "deleted", "blocked"],
};
// The page's time format: "2026-12-04 13:25:55 UTC".
const time = (t) => `${new Date(t).toISOString().slice(0, 19).replace("T", " ")} UTC`;
// A summary's leaves by path ({"a": {"b": 1}} → {"a.b": 1}); an empty object or array, and an
// array without objects, are leaves.
function leaves(value, prefix = "", out = {}) {
  const nested = value !== null && typeof value === "object" &&
    (Array.isArray(value) ? value.some((v) => v !== null && typeof v === "object") : Object.keys(value).length > 0);
  if (nested) for (const [k, v] of Object.entries(value)) leaves(v, prefix ? `${prefix}.${k}` : k, out);
  else out[prefix] = value;
  return out;
}
// A leaf as the page must show it.
function leafText(path, v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") return count(v);
  if (Array.isArray(v)) return v.length ? v.join(", ") : "none";
  if (typeof v === "object") return "none";
  if (/^\d{4}-\d\d-\d\dT/.test(v)) return time(v);
  return String(v);
}

// Checks the summary shown in `scope` against the API's `summary` of a run of `job`: the error
// first and visible, the headline numbers the API's, no JSON, every field shown (headline or
// folded); opens the folded part and checks every folded field shows with its value.
async function checkSummary(page, scope, job, summary, what) {
  const root = page.locator(`${scope} [data-summary]`).first();
  expect((await root.count()) === 1, `${what}: a summary shows`);
  const shown = await root.evaluate((s) => ({
    text: s.textContent,
    first: s.firstElementChild && s.firstElementChild.hasAttribute("data-summary-error") ? s.firstElementChild.textContent : null,
    headline: [...s.querySelectorAll(".headline [data-paths]")].map((h) => ({ paths: h.dataset.paths.split(","), format: h.dataset.format, text: h.textContent })),
    folded: [...s.querySelectorAll("details [data-path]")].map((d) => [d.dataset.path, d.textContent]),
    open: s.querySelector("details") ? s.querySelector("details").open : null,
  }));
  expect(!/[{}]/.test(shown.text), `${what}: no raw JSON in the summary: ${shown.text}`);
  if (summary === null || typeof summary !== "object") {
    expect(shown.text.includes(summary === null ? "–" : String(summary)), `${what}: a summary that is no object shows as text: ${shown.text}`);
    return;
  }
  if (summary.error) {
    expect(shown.first !== null && shown.first.includes(summary.error), `${what}: the error shows first: ${shown.first}`);
    expect(await root.locator("[data-summary-error]").isVisible(), `${what}: the error is visible unopened`);
  }
  const all = leaves(summary);
  const at = (p) => all[p];
  for (const h of shown.headline) {
    let want;
    if (h.format === "list") want = h.paths.map(at).flat().join(", ");
    else {
      const n = h.paths.reduce((s, p) => s + (p.endsWith(".*")
        ? Object.entries(all).filter(([k]) => k.startsWith(p.slice(0, -1))).reduce((t, [, v]) => t + v, 0)
        : at(p)), 0);
      want = h.format === "bytes" ? bytes(n) : count(n);
    }
    expect(h.text === want, `${what}: headline ${h.paths} shows ${h.text}, the API says ${want}`);
  }
  const headPaths = new Set(shown.headline.flatMap((h) => h.paths));
  for (const p of HEADLINE[job] || []) expect(headPaths.has(p), `${what}: ${p} is in the headline: ${[...headPaths]}`);
  const folded = new Map(shown.folded);
  const covered = (p) => headPaths.has(p) || folded.has(p) || [...headPaths].some((h) => h.endsWith(".*") && p.startsWith(h.slice(0, -1)));
  const dropped = Object.keys(all).filter((p) => p !== "error" && !covered(p));
  expect(dropped.length === 0, `${what}: every field shows, in the headline or folded; dropped: ${dropped}`);
  for (const [p, text] of shown.folded) {
    expect(p in all, `${what}: folded ${p} is the API's`);
    expect(text.includes(leafText(p, all[p])), `${what}: folded ${p} shows ${text}, the API says ${JSON.stringify(all[p])}`);
  }
  // Folded until opened; opened, every folded field shows.
  if (shown.folded.length) {
    expect(shown.open === false && !(await root.locator("details [data-path]").first().isVisible()), `${what}: the rest is folded`);
    await root.locator("details > summary").first().click();
    const hidden = await root.evaluate((s) => [...s.querySelectorAll("details [data-path]")].filter((d) => !d.checkVisibility()).map((d) => d.dataset.path));
    expect(hidden.length === 0, `${what}: opened, every folded field shows: hidden ${hidden}`);
  }
  return { headline: shown.headline, folded: shown.folded.map(([p]) => p) };
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
let failed = null;
const result = {};
try {
  // This run's screenshots only.
  rmSync(shots, { recursive: true, force: true });
  mkdirSync(shots, { recursive: true });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));

  // ---- sign in --------------------------------------------------------------------------
  await page.goto(`${base}/admin`);
  await page.waitForSelector("body[data-page=sign-in][data-state=ready]");
  expect(await page.isVisible("#token"), "the sign-in form shows");
  expect(!(await page.isVisible("#nav")), "no navigation before signing in");
  await shot(page, "sign-in-desktop");
  await settle(page, "overview", async () => {
    await page.fill("#token", admin);
    await page.click("#sign-in-button");
  });
  const stored = await page.evaluate(() => ({ session: Object.keys(sessionStorage), local: localStorage.length, value: sessionStorage.getItem("upcommit.console.token") }));
  expect(stored.value === admin && stored.local === 0, `the token is kept in sessionStorage only: ${JSON.stringify({ ...stored, value: !!stored.value })}`);

  // ---- overview -------------------------------------------------------------------------
  const bucket = await get("/v1/admin/bucket");
  expect((await page.textContent("[data-field=verdict]")) === bucket.verdict, `the bucket's verdict is the API's (${bucket.verdict})`);
  expect(bucket.report && bucket.report.results.length > 0, "the bucket has been checked");
  const checks = await page.$$eval("[data-section=bucket] tr[data-check]", (rows) =>
    rows.map((r) => [r.getAttribute("data-check"), r.children[1].textContent]));
  expect(same(checks, bucket.report.results.map((r) => [r.check, r.ok ? "pass" : "fail"])), `every check with its result: ${JSON.stringify(checks)}`);
  const standings = await page.$$eval("[data-section=bucket] tr[data-capability]", (rows) =>
    rows.map((r) => [r.getAttribute("data-capability"), r.querySelector("[data-standing]").getAttribute("data-standing")]));
  expect(standings.length > 0 && same(standings, bucket.capabilities.map((c) => [c.capability, c.standing])),
    `every capability with its standing: ${JSON.stringify(standings)}`);
  expect(standings.some(([, s]) => s === "accepted"), "LocalStack's accepted gap (post_signature) shows as accepted");

  const report = await get("/v1/admin/storage-report");
  for (const dim of ["by_status", "by_storage_class", "by_profile"]) {
    const want = Object.fromEntries(report[dim].map((r) => [r.name, bytes(r.bytes)]));
    const wantCount = Object.fromEntries(report[dim].map((r) => [r.name, count(r.count)]));
    const shownBytes = await chart(page, `${dim}.bytes`);
    const shownCount = await chart(page, `${dim}.count`);
    expect(report[dim].length > 0 && same(Object.entries(shownBytes).sort(), Object.entries(want).sort()), `${dim} bytes: shown ${JSON.stringify(shownBytes)}, API ${JSON.stringify(want)}`);
    expect(same(Object.entries(shownCount).sort(), Object.entries(wantCount).sort()), `${dim} objects: shown ${JSON.stringify(shownCount)}, API ${JSON.stringify(wantCount)}`);
  }
  expect(["image", "recording"].every((p) => report.by_profile.some((r) => r.name === p && r.count > 0 && r.bytes > 0)), "both profiles hold files");
  const tmpShown = await chart(page, "tmp_by_age.objects");
  const AGE = { under_1d: "under 1 day", "1d_to_7d": "1–7 days", "7d_to_30d": "7–30 days", over_30d: "over 30 days" };
  expect(same(tmpShown, Object.fromEntries(report.tmp_by_age.map((t) => [AGE[t.age], count(t.objects)]))), `tmp by age: ${JSON.stringify(tmpShown)} vs ${JSON.stringify(report.tmp_by_age)}`);
  expect(report.tmp_by_age.some((t) => t.objects > 0), "the uncommitted upload is in the tmp backlog");
  expect((await page.textContent("[data-field=estimated_monthly_cost]")) === Number(report.estimated_monthly_cost).toFixed(2), "the cost estimate");
  const perDay = (k) => report.uploads_per_day.reduce((s, d) => s + d[k], 0);
  const uploadsText = await page.textContent("[data-field=uploads_total]");
  expect(uploadsText === `${count(perDay("presigned"))} presigned, ${count(perDay("committed"))} committed, ${bytes(perDay("committed_bytes"))} committed`,
    `uploads per day: ${uploadsText}`);
  expect(perDay("committed") >= 4 && (await page.$$("[data-chart=uploads_per_day] g[data-day]")).length === 30, "30 days, with today's commits");

  const { webhooks } = await get("/v1/admin/webhooks");
  const depth = webhooks.reduce((s, w) => s + w.pending, 0);
  const failedDeliveries = webhooks.reduce((s, w) => s + w.failed, 0);
  expect(failedDeliveries > 0, "the failing webhook has failed deliveries");
  expect((await page.textContent("[data-field=outbox_depth]")) === count(depth), `outbox depth ${depth}`);
  expect((await page.textContent("[data-field=outbox_failed]")) === count(failedDeliveries), `failed deliveries ${failedDeliveries}`);
  expect((await page.textContent("[data-field=outbox_oldest]")) !== "none", "the oldest undelivered age shows");
  const { jobs } = await get("/v1/admin/jobs");
  for (const j of jobs) {
    const row = await page.textContent(`[data-section=jobs] tr[data-job="${j.job}"]`);
    expect(j.last_run ? row.includes(j.last_run.state) : row.includes("never"), `job ${j.job}: ${row}`);
    // Its schedule as the API says it: prune runs after each sweep, not "not scheduled here".
    expect(row.includes(j.schedule), `job ${j.job}'s schedule ${j.schedule}: ${row}`);
    if (j.last_run) await checkSummary(page, `[data-section=jobs] tr[data-job="${j.job}"]`, j.job, j.last_run.summary, `overview: ${j.job}'s last run`);
  }
  expect(jobs.find((j) => j.job === "prune").schedule === "after each sweep", "prune is on the sweep's schedule");
  expect(jobs.find((j) => j.job === "hygiene").last_run && jobs.find((j) => j.job === "sweep").last_run, "hygiene and the sweep ran");
  await shot(page, "overview-failing-webhook-desktop");

  // ---- files ----------------------------------------------------------------------------
  const listed = async () => attrs(page, "tr[data-file]", "data-file");
  await go(page, `#/files?owner=${fx.owner}`, "files");
  let want = (await get(`/v1/admin/files?owner=${fx.owner}&limit=50`)).files.map((f) => f.id);
  expect(want.length >= 4 && same(await listed(), want), `the owner's files, newest first: ${JSON.stringify(await listed())} vs ${JSON.stringify(want)}`);
  // Paged: two at a time, "Next page" continues where the API's next_before says.
  await go(page, `#/files?owner=${fx.owner}&limit=2`, "files");
  const first = await get(`/v1/admin/files?owner=${fx.owner}&limit=2`);
  expect(same(await listed(), first.files.map((f) => f.id)) && first.next_before, "the first page of two");
  await settle(page, "files", () => page.click("text=Next page"));
  const second = await get(`/v1/admin/files?owner=${fx.owner}&limit=2&before=${encodeURIComponent(first.next_before)}`);
  expect(same(await listed(), second.files.map((f) => f.id)), "the next page is the API's next page");
  // The form (from the page of every file): status, then key prefix, then id.
  await go(page, "#/files", "files");
  await settle(page, "files", async () => {
    await page.selectOption("#f-status", "unlinked");
    await page.click("#file-search button[type=submit]");
  });
  want = (await get("/v1/admin/files?status=unlinked")).files.map((f) => f.id);
  expect(same(await listed(), want) && want.includes(fx.unlinked) && want.includes(fx.copy), `unlinked files: ${JSON.stringify(want)}`);
  const linkedFile = (await get(`/v1/admin/files/${fx.linked}`)).file;
  const prefix = linkedFile.key.split("/").slice(0, 2).join("/") + "/";
  await settle(page, "files", async () => {
    await page.selectOption("#f-status", "");
    await page.fill("#f-key_prefix", prefix);
    await page.click("#file-search button[type=submit]");
  });
  want = (await get(`/v1/admin/files?key_prefix=${encodeURIComponent(prefix)}`)).files.map((f) => f.id);
  expect(want.includes(fx.linked) && same(await listed(), want), `files under ${prefix}`);
  await settle(page, "files", async () => {
    await page.fill("#f-key_prefix", "");
    await page.fill("#f-id", fx.linked);
    await page.click("#file-search button[type=submit]");
  });
  expect(same(await listed(), [fx.linked]), "found by id");
  await shot(page, "files-search-desktop");

  // The linked file's page: its link.
  await settle(page, "file", () => page.click(`tr[data-file="${fx.linked}"] a`));
  expect(same(await attrs(page, "tr[data-link]", "data-link"), (await get(`/v1/admin/files/${fx.linked}`)).links.map((l) => `${l.object_type}/${l.object_id}`))
    && (await page.$$("tr[data-link]")).length === 1, "the file's link");

  // The unlinked file's page: handle, copies, events as the API has them.
  await go(page, `#/files/${fx.unlinked}`, "file");
  let detail = await get(`/v1/admin/files/${fx.unlinked}`);
  expect((await page.textContent("[data-field=status]")) === "unlinked" && detail.file.status === "unlinked", "the handle's status");
  expect((await page.textContent("[data-field=owner]")) === detail.file.created_by, "the owner");
  expect((await page.textContent("[data-field=size]")).startsWith(bytes(detail.file.size)), "the size");
  expect(detail.file.image && (await page.textContent("[data-field=image]")) === `${detail.file.image.width} × ${detail.file.image.height} px`,
    `the image's dimensions: ${JSON.stringify(detail.file.image)}`);
  expect(same(await attrs(page, "tr[data-copy]", "data-copy"), detail.copies.map((c) => c.id)) && detail.copies.some((c) => c.id === fx.copy), "its copies");
  expect(same(await attrs(page, "tr[data-event]", "data-event"), detail.events.map((e) => e.id)), "its events");
  const eventTypes = await page.$$eval("tr[data-event]", (rows) => rows.map((r) => r.children[1].textContent));
  expect(same(eventTypes, detail.events.map((e) => e.type)) && eventTypes.includes("file.unlinked"), `event types: ${eventTypes}`);
  await shot(page, "file-unlinked-desktop");

  // Restore: 200, and the handle is available again.
  let a = await acted(page, "Restore", () => page.click("#action-restore"));
  expect(a.status === 200 && a.json.status === "available", `restore: ${JSON.stringify(a)}`);
  expect((await page.textContent("[data-field=status]")) === "available", "the handle shows available");
  expect((await get(`/v1/admin/files/${fx.unlinked}`)).file.status === "available", "the API says available");
  result.restored = fx.unlinked;

  // Copy: 201 with the new id, listed among the copies, and its page names its source.
  a = await acted(page, "Copy", () => page.click("#action-copy"));
  const newCopy = await page.getAttribute("[data-new-file]", "data-new-file");
  expect(a.status === 201 && a.json.id === newCopy && a.json.copied_from === fx.unlinked, `copy: ${JSON.stringify(a)}`);
  expect((await attrs(page, "tr[data-copy]", "data-copy")).includes(newCopy), "the new copy is listed");
  result.new_copy = newCopy;

  // Download: the presigned URL is shown, opens, and serves the file's bytes.
  a = await acted(page, "Download", () => page.click("#action-download"));
  const href = await page.getAttribute("#download-link", "href");
  expect(a.status === 200 && a.json.url === href && /^https?:\/\//.test(href), `download: ${JSON.stringify(a)}`);
  // The link downloads the file's bytes (the store's `Content-Disposition: attachment`), and
  // the console stays.
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download-link")]);
  const saved = await download.path();
  expect(download.url() === href && statSync(saved).size === detail.file.size,
    `the URL downloads the file's bytes: ${download.url()} ${statSync(saved).size}`);
  expect(page.url().startsWith(`${base}/admin#/files/`), `the console stays: ${page.url()}`);
  await shot(page, "file-actions-desktop");

  await settle(page, "file", () => page.click("[data-new-file]"));
  expect((await page.textContent("[data-field=copied_from]")) === fx.unlinked, "the new copy's page names its source");

  // A refused action shows its status and code: an unlinked copy cannot be copied.
  await go(page, `#/files/${fx.copy}`, "file");
  a = await acted(page, "Copy", () => page.click("#action-copy"));
  expect(a.status === 409 && a.code === "file_not_available", `copying an unlinked file: ${JSON.stringify(a)}`);

  // ---- events ---------------------------------------------------------------------------
  await go(page, "#/events", "events");
  for (const w of (await get("/v1/admin/webhooks")).webhooks) {
    const shown = await endpointCounts(page, w.id);
    expect(same(shown, { pending: w.pending, failed: w.failed, delivered: w.delivered }), `endpoint ${w.id}: ${JSON.stringify(shown)} vs ${JSON.stringify(w)}`);
  }
  await shot(page, "events-failing-desktop");
  await settle(page, "endpoint", () => page.click(`tr[data-endpoint="${fx.endpoint}"] a`));
  const failedList = await get(`/v1/admin/webhooks/${fx.endpoint}/deliveries?state=failed`);
  expect(failedList.deliveries.length >= 2, "at least two failed deliveries");
  expect(same(await attrs(page, "tr[data-delivery]", "data-delivery"), failedList.deliveries.map((d) => d.event_id)), "the failed deliveries, as the API lists them");
  const lastErrors = await page.$$eval("tr[data-delivery]", (rows) => rows.map((r) => r.children[5].textContent));
  expect(same(lastErrors, failedList.deliveries.map((d) => d.last_error || "")) && lastErrors.every((e) => e.length > 0), `their last errors: ${lastErrors}`);
  await shot(page, "endpoint-failed-deliveries-desktop");

  // Replay from the first failed delivery's cursor: the later ones are due again.
  let before = await endpointCounts(page, fx.endpoint);
  await page.fill("#replay-after", failedList.deliveries[0].cursor);
  a = await acted(page, "Replay", () => page.click("#action-replay"));
  let after = await endpointCounts(page, fx.endpoint);
  expect(a.status === 200 && a.json.endpoint === fx.endpoint && a.json.after === failedList.deliveries[0].cursor && a.json.due_again > 0, `replay: ${JSON.stringify(a)}`);
  expect(after.failed < before.failed && after.pending > before.pending, `replay changed the counts: ${JSON.stringify(before)} → ${JSON.stringify(after)}`);

  // Retry: the failed ones left are due again.
  before = after;
  a = await acted(page, "Retry", () => page.click("#action-retry"));
  after = await endpointCounts(page, fx.endpoint);
  expect(a.status === 200 && a.json.due_again === before.failed && before.failed > 0, `retry: ${JSON.stringify(a)} after ${JSON.stringify(before)}`);
  expect(after.failed === 0 && after.pending === before.pending + before.failed, `retry changed the counts: ${JSON.stringify(before)} → ${JSON.stringify(after)}`);

  // Disable (confirmed in the page): 204, then the endpoint shows disabled and a retry is refused.
  await page.click("#action-disable");
  expect(await page.isVisible("#disable-confirm"), "disabling asks first");
  a = await acted(page, "Disable", () => page.click("#action-disable-confirm"));
  expect(a.status === 204, `disable: ${JSON.stringify(a)}`);
  expect((await page.$eval(`tr[data-endpoint="${fx.endpoint}"]`, (r) => r.children[4].textContent)) === "no", "the endpoint shows disabled");
  expect((await get("/v1/admin/webhooks")).webhooks.find((w) => w.id === fx.endpoint).enabled === false, "the API says disabled");
  a = await acted(page, "Retry", () => page.click("#action-retry"));
  expect(a.status === 409 && a.code === "webhook_disabled", `retry of a disabled endpoint: ${JSON.stringify(a)}`);
  result.disabled = fx.endpoint;
  await shot(page, "endpoint-actions-desktop");

  // ---- jobs -----------------------------------------------------------------------------
  await go(page, "#/jobs", "jobs");
  let runs = await get("/v1/admin/jobs/runs?limit=25");
  expect(same(await attrs(page, "tr[data-run]", "data-run"), runs.runs.map((r) => r.id)), "the history, newest first");
  expect(runs.runs.some((r) => r.job === "hygiene" && !r.dry_run) && runs.runs.some((r) => r.job === "sweep"), "hygiene's and the sweep's runs are in it");
  // Each job's last run (GET /v1/admin/jobs) and each run of the history, summarised.
  for (const j of (await get("/v1/admin/jobs")).jobs) {
    if (j.last_run) await checkSummary(page, `[data-section=schedule] tr[data-job="${j.job}"]`, j.job, j.last_run.summary, `jobs: ${j.job}'s last run`);
  }
  const folds = {};
  for (const r of runs.runs) folds[r.id] = await checkSummary(page, `tr[data-run="${r.id}"]`, r.job, r.summary, `jobs: ${r.job} run ${r.id}`);
  const sweepRun = runs.runs.find((r) => r.job === "sweep");
  expect(["recovery.commits_failed", "settled_tmp.uploads_cleared"].every((p) => folds[sweepRun.id].folded.includes(p)),
    `the sweep's nested totals are folded rows: ${folds[sweepRun.id].folded}`);
  await shot(page, "jobs-summaries-open-desktop");
  a = await acted(page, "Hygiene dry run", () => page.click("#action-hygiene-dry-run"));
  expect(a.status === 202 && typeof a.json.run_id === "string", `dry run: ${JSON.stringify(a)}`);
  const dry = a.json.run_id;
  const dryState = await page.textContent("[data-field=dry-run-state]");
  const dryRun = (await get(`/v1/admin/jobs/runs/${dry}`)).run;
  expect(dryState === "finished" && dryRun.state === "finished" && dryRun.dry_run === true, `the dry run finished: ${dryState} ${JSON.stringify(dryRun)}`);
  expect(Object.keys(dryRun.summary).length > 0, "the dry run has a summary");
  await checkSummary(page, "[data-field=dry-run-summary]", "hygiene", dryRun.summary, "the dry run's answer");
  runs = await get("/v1/admin/jobs/runs?limit=25");
  expect(runs.runs[0].id === dry && same(await attrs(page, "tr[data-run]", "data-run"), runs.runs.map((r) => r.id)), "the dry run heads the history");
  result.dry_run = dry;
  await shot(page, "jobs-dry-run-desktop");
  // Filtered by job, and paged.
  await page.selectOption("#job-filter", "sweep");
  await settle(page, "jobs", () => page.click("#job-filter-show"));
  expect(same(await attrs(page, "tr[data-run]", "data-run"), (await get("/v1/admin/jobs/runs?job=sweep&limit=25")).runs.map((r) => r.id)), "the sweep's runs");
  await go(page, "#/jobs?limit=1", "jobs");
  const page1 = await get("/v1/admin/jobs/runs?limit=1");
  await settle(page, "jobs", () => page.click("text=Older runs"));
  const page2 = await get(`/v1/admin/jobs/runs?limit=1&before=${encodeURIComponent(page1.next_before)}`);
  expect(same(await attrs(page, "tr[data-run]", "data-run"), page2.runs.map((r) => r.id)), "older runs: the API's next page");
  // A run's findings: the real hygiene run unlinked files.
  const hygieneRun = runs.runs.find((r) => r.job === "hygiene" && !r.dry_run);
  await go(page, `#/jobs/${hygieneRun.id}`, "run");
  const items = await get(`/v1/admin/jobs/runs/${hygieneRun.id}?limit=100`);
  expect(items.items.length > 0 && same(await attrs(page, "tr[data-item]", "data-item"), items.items.map((i) => i.key)), "the run's findings");
  await checkSummary(page, "[data-field=summary]", "hygiene", items.run.summary, "hygiene's run page");
  await shot(page, "run-findings-desktop");
  await go(page, `#/jobs/${sweepRun.id}`, "run");
  await checkSummary(page, "[data-field=summary]", "sweep", (await get(`/v1/admin/jobs/runs/${sweepRun.id}`)).run.summary, "the sweep's run page");
  await shot(page, "run-sweep-summary-desktop");
  // A job this console does not know, and fields it does not know, with an error: shown all
  // the same (the error first, the rest folded), never dropped. The API's answer, amended on
  // its way to the page.
  const amend = async (id, change) => page.route(`**/v1/admin/jobs/runs/${id}?*`, async (route) => {
    const resp = await route.fetch();
    const body = await resp.json();
    change(body.run);
    await route.fulfill({ response: resp, json: body });
  });
  const unknown = {};
  await amend(sweepRun.id, (r) => {
    r.job = "compaction";
    r.state = "failed";
    r.summary = { ...r.summary, error: "the run panicked: shard 7 is gone", pages_compacted: 12, shard: { name: "s7", rows: 3, tags: ["a", "b"] } };
    unknown.compaction = r.summary;
  });
  await amend(dry, (r) => {
    r.summary = { ...r.summary, error: "catalog: connection reset", requeued: 4, per_profile: { image: { unlinked: 2 } } };
    unknown.hygiene = r.summary;
  });
  await go(page, "#/jobs?limit=1", "jobs");
  await go(page, `#/jobs/${sweepRun.id}`, "run");
  let seen = await checkSummary(page, "[data-field=summary]", "compaction", unknown.compaction, "an unknown job's run");
  expect(["pages_compacted", "shard.name", "shard.rows", "shard.tags", "deleted_versions"].every((p) => seen.folded.includes(p)), `the unknown job's fields, folded: ${seen.folded}`);
  await shot(page, "run-unknown-job-desktop");
  await go(page, `#/jobs/${dry}`, "run");
  seen = await checkSummary(page, "[data-field=summary]", "hygiene", unknown.hygiene, "a run with unknown fields");
  expect(["requeued", "per_profile.image.unlinked"].every((p) => seen.folded.includes(p)), `the unknown fields, folded: ${seen.folded}`);
  await shot(page, "run-unknown-fields-desktop");
  // Prune's shape (no prune ran here): counts added up across nested totals and a map.
  await amend(hygieneRun.id, (r) => {
    r.job = "prune";
    r.summary = {
      dry_run: false, retention_secs: 2592000, cutoff: "2026-11-04T10:00:00Z",
      uploads: { committed: 1200, rejected: 3, expired: 40, multipart_sessions: 2, upload_parts: 9 },
      quota_rows: 5, quota_before: "2026-11-04", discarded_deliveries: { "hook-a": 2, "hook-b": 5 }, events: 31,
      job_runs: 4, job_history_cutoff: "2026-09-05T10:00:00Z", link_scans: { superseded: 1, abandoned: 1, batches: 6, seen: 5000 },
      batches: 3,
    };
    unknown.prune = r.summary;
  });
  await go(page, `#/jobs/${hygieneRun.id}`, "run");
  seen = await checkSummary(page, "[data-field=summary]", "prune", unknown.prune, "a prune run");
  const heads = seen.headline.map((h) => `${h.paths}=${h.text}`);
  expect(["uploads.committed,uploads.rejected,uploads.expired=1,243", "discarded_deliveries.*=7", "link_scans.superseded,link_scans.abandoned=2", "events=31", "job_runs=4"]
    .every((h) => heads.includes(h)), `prune's headline: ${heads}`);
  expect(["uploads.upload_parts", "link_scans.seen", "retention_secs", "quota_before"].every((p) => seen.folded.includes(p)), `prune's rest, folded: ${seen.folded}`);
  await shot(page, "run-prune-desktop");
  for (const id of [sweepRun.id, dry, hygieneRun.id]) await page.unroute(`**/v1/admin/jobs/runs/${id}?*`);

  // ---- every page at 375 px and at desktop width ----------------------------------------
  const pages = [
    ["overview", "#/overview", "overview"],
    ["files", `#/files?owner=${fx.owner}`, "files"],
    ["file", `#/files/${fx.unlinked}`, "file"],
    ["events", "#/events", "events"],
    ["endpoint", `#/events/${fx.endpoint}`, "endpoint"],
    ["jobs", "#/jobs", "jobs"],
    ["run", `#/jobs/${hygieneRun.id}`, "run"],
    ["run-sweep", `#/jobs/${sweepRun.id}`, "run"],
  ];
  const widths = {};
  for (const [size, viewport] of [["375", { width: 375, height: 812 }], ["desktop", { width: 1280, height: 900 }]]) {
    await page.setViewportSize(viewport);
    for (const [name, hash, route] of pages) {
      // From another page, so that the hash changes and the page is drawn at this width.
      await go(page, "#/jobs?limit=1", "jobs");
      await go(page, hash, route);
      // Every folded part open: what it holds must fit too.
      await page.$$eval("details", (ds) => ds.forEach((d) => { d.open = true; }));
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      widths[`${name}-${size}`] = width;
      if (size === "375") expect(width <= 375, `${name} at 375 px scrolls sideways: ${width}`);
      await shot(page, `${name}-${size}`);
    }
  }
  result.widths = widths;

  // ---- hand-made addresses (review 37) ------------------------------------------------------
  // An id that is not one is refused before any call: `..` would be resolved by fetch into
  // another route's path.
  const sent = [];
  const record = (r) => { if (new URL(r.url()).pathname.startsWith("/v1/")) sent.push(new URL(r.url()).pathname); };
  page.on("request", record);
  for (const [hash, route, what] of [["#/files/..", "file", "file id"], ["#/files/.", "file", "file id"],
    ["#/events/..", "endpoint", "endpoint id"], ["#/jobs/..", "run", "run id"], ["#/files/%E0%A4%A", "file", "file id"]]) {
    sent.length = 0;
    await goFailing(page, hash, route);
    const shown = await page.textContent("#view");
    expect(shown.includes(`no such ${what}`), `${hash} is refused: ${shown.slice(0, 200)}`);
    expect(!sent.some((p) => /^\/v1\/admin\/?$|^\/v1\/(restore|copies|download-url)$|\/webhooks\/?$/.test(p)), `${hash} called no other route: ${sent}`);
  }
  page.off("request", record);
  // A 64-character endpoint id (the longest the API takes) in the disable confirmation still
  // fits 375 px.
  await page.setViewportSize({ width: 375, height: 812 });
  await goFailing(page, `#/events/${"w".repeat(64)}`, "endpoint");
  await page.click("#action-disable");
  const confirmWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(confirmWidth <= 375, `the disable confirmation at 375 px scrolls sideways: ${confirmWidth}`);
  await page.click("#disable-confirm button.secondary");
  expect((await page.evaluate(() => document.activeElement && document.activeElement.id)) === "action-disable", "Cancel gives the focus back to Disable…");
  await page.setViewportSize({ width: 1280, height: 900 });

  // ---- sign out -------------------------------------------------------------------------
  // While an action's answer is on its way (review 37: the answer then reloaded the page with
  // no token, and the sign-in screen blamed the token).
  await go(page, `#/files/${fx.linked}`, "file");
  await page.route("**/restore", async (route) => {
    await new Promise((done) => setTimeout(done, 1500));
    await route.continue();
  });
  await page.click("#action-restore");
  await page.click("#sign-out");
  await page.waitForSelector("body[data-page=sign-in]");
  await page.waitForTimeout(2500);
  await page.unroute("**/restore");
  expect((await page.textContent("#sign-in-error")) === "", `a sign-out is not a refusal: ${await page.textContent("#sign-in-error")}`);
  expect(await page.evaluate(() => sessionStorage.length === 0 && document.getElementById("view").childElementCount === 0), "signing out forgets the token and clears the page");

  // A paste that is no token (here with a character a header cannot carry) is not kept.
  await page.fill("#token", `${admin}…`);
  await page.click("#sign-in-button");
  await page.waitForSelector("body[data-page=sign-in][data-state=refused]");
  expect(/not a token/.test(await page.textContent("#sign-in-error")), "a paste that is no token is refused");
  expect(await page.evaluate(() => sessionStorage.length === 0), "and not kept");
  // Text in the address is never shown as the page's: this console has no provider sign-in.
  await page.goto(`${base}/admin?error=Your%20session%20expired%3A%20paste%20your%20token%20at%20evil.example#/overview`);
  await page.waitForSelector("body[data-page=sign-in]");
  expect(!(await page.textContent("body")).includes("evil.example"), "the address's text is not shown");
  expect((await page.evaluate(() => location.search)) === "", "and leaves the address bar");

  const unexpected = errors.filter((e) => !/Failed to load resource/.test(e));
  expect(unexpected.length === 0, `no script errors or CSP violations: ${unexpected.join(" | ")}`);

  // ---- by keyboard only -----------------------------------------------------------------
  const kb = await (await browser.newContext({ viewport: { width: 375, height: 812 } })).newPage();
  await kb.goto(`${base}/admin`);
  await kb.waitForSelector("body[data-page=sign-in][data-state=ready]");
  const focused = () => kb.evaluate(() => {
    const e = document.activeElement;
    return e ? e.id || e.getAttribute("data-nav") || e.tagName : "";
  });
  async function tabTo(target, key = "Tab", most = 40) {
    for (let i = 0; i < most; i += 1) {
      await kb.keyboard.press(key);
      if ((await focused()) === target) return i + 1;
    }
    throw new Error(`expectation failed: ${key} never reached ${target} (at ${await focused()})`);
  }
  const steps = {};
  steps.token = await tabTo("token");
  await kb.keyboard.type(admin);
  await settle(kb, "overview", () => kb.keyboard.press("Enter"));
  // From the page's title back to the navigation.
  steps.nav = await tabTo("jobs", "Shift+Tab");
  await settle(kb, "jobs", () => kb.keyboard.press("Enter"));
  steps.action = await tabTo("action-hygiene-dry-run");
  a = await acted(kb, "Hygiene dry run", () => kb.keyboard.press("Enter"));
  expect(a.status === 202, `the dry run by keyboard: ${JSON.stringify(a)}`);
  result.keyboard = steps;
  await shot(kb, "keyboard-375");

  // ---- a user token, and a bad one, see nothing but the error ---------------------------
  for (const [token, code, name] of [[user, "admin_required", "refused-user"], ["not.a.token", "unauthorized", "refused-bad-token"]]) {
    const p = await (await browser.newContext({ viewport: { width: 375, height: 812 } })).newPage();
    const seen = [];
    p.on("response", (r) => { if (r.url().includes("/v1/")) seen.push(r.status()); });
    await p.goto(`${base}/admin#/files?owner=${fx.owner}`);
    await p.waitForSelector("body[data-page=sign-in][data-state=ready]");
    await p.fill("#token", token);
    await p.click("#sign-in-button");
    await p.waitForSelector("body[data-state=refused]");
    const shown = await p.evaluate(() => ({
      error: document.getElementById("sign-in-error").textContent,
      view: document.getElementById("view").textContent,
      nav: !document.getElementById("nav").hidden,
      stored: sessionStorage.length,
      data: document.querySelectorAll("[data-section], table, svg, [data-file]").length,
    }));
    expect(shown.error.includes(code) && shown.view === "" && !shown.nav && shown.stored === 0 && shown.data === 0,
      `${name}: only the error shows: ${JSON.stringify(shown)}`);
    expect(seen.length > 0 && seen.every((s) => s === (code === "admin_required" ? 403 : 401)), `${name}: every call was refused: ${seen}`);
    await shot(p, name);
  }
  result.screenshots = screenshots;
} catch (e) {
  failed = e;
  // What the page showed when an expectation failed, for whoever reads the failure.
  for (const [i, p] of browser.contexts().flatMap((c) => c.pages()).entries()) {
    await p.screenshot({ path: path.join(shots, `failure-${i}.png`), fullPage: true }).catch(() => {});
  }
} finally {
  await browser.close();
}
if (failed) {
  console.error(failed.stack || String(failed));
  process.exit(1);
}
console.log(JSON.stringify(result));
