// upcommit's admin console: one page, hash routes (#/overview, #/files, #/files/<id>, #/events,
// #/events/<endpoint>, #/jobs, #/jobs/<run>), drawn from the admin API with the token the
// operator pasted. Every number shown and every action taken is one documented `/v1/...` call
// (openapi.yaml); the page keeps nothing but the token, in this tab's sessionStorage.
//
// Everything the API answers is put in the page as text (textContent, SVG text nodes, hrefs
// built from encoded ids): keys, filenames, URLs and error messages are attacker-chosen.
// Plain JavaScript, no build step, no dependency; charts are inline SVG.

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

// ---- the session -------------------------------------------------------------------------

// The token, for this tab only. Signing in through the identity provider ends with
// `session.set(token)` as pasting does.
const TOKEN_KEY = "upcommit.console.token";
// A bearer token: printable ASCII without spaces (anything else a browser cannot even send).
const TOKEN_FORM = /^[\x21-\x7e]+$/;
const session = {
  token: () => sessionStorage.getItem(TOKEN_KEY),
  set: (token) => sessionStorage.setItem(TOKEN_KEY, token),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

// ---- the API -----------------------------------------------------------------------------

// One call: {status, ok, body (parsed JSON or null), code, message, location}. Never throws.
async function call(method, path, body) {
  const headers = { Authorization: `Bearer ${session.token() || ""}` };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    return { status: 0, ok: false, body: null, code: "network", message: String(e.message || e) };
  }
  const text = await resp.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  const error = json && typeof json === "object" && json.error ? json.error : null;
  return {
    status: resp.status,
    ok: resp.ok,
    body: json,
    code: error ? error.code : null,
    message: error ? error.message : null,
    location: resp.headers.get("Location"),
  };
}

// The token itself was refused (none, expired, not an admin's): not an answer about the thing
// asked for.
const endsSession = (answer) => answer.status === 401 || (answer.status === 403 && answer.code === "admin_required");

class ApiError extends Error {
  constructor(path, answer) {
    super(`${path}: ${answer.status} ${answer.code || ""} ${answer.message || ""}`.trim());
    this.answer = answer;
  }
}

// A read a page needs: its JSON, or an ApiError. A refused token ends the session (and shows
// nothing but why), whatever page asked.
async function load(path) {
  // The session ended (a refused token, a sign-out) while the page was being drawn: nothing
  // more is asked, so the reason shown stays the first refusal's (a later call would go
  // without a token and be refused as 401).
  if (!session.token()) throw new SessionEnded();
  const answer = await call("GET", path);
  if (endsSession(answer)) {
    refused(answer);
    throw new ApiError(path, answer);
  }
  if (!answer.ok) throw new ApiError(path, answer);
  return answer.body;
}

const q = (params) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") s.set(k, v);
  const text = s.toString();
  return text ? `?${text}` : "";
};
const enc = encodeURIComponent;

// ---- formatting --------------------------------------------------------------------------

function fmtBytes(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}
const fmtCount = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "–");
function fmtTime(t) {
  if (!t) return "–";
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return `${d.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}
function fmtAge(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}
const ageSince = (t) => (t ? (Date.now() - new Date(t).getTime()) / 1000 : null);
const AGE_LABELS = { under_1d: "under 1 day", "1d_to_7d": "1–7 days", "7d_to_30d": "7–30 days", over_30d: "over 30 days" };

// ---- DOM helpers (text only) -------------------------------------------------------------

// el("td", {class: "num"}, "text", otherNode): attributes are set as attributes, children as
// text nodes or nodes; nothing is ever parsed as HTML.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "onclick" || k === "onsubmit" || k === "onchange") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function link(href, text, attrs) {
  return el("a", { href, ...(attrs || {}) }, text);
}

// A table: columns [{title, num?}], rows of cells (text or nodes). Scrolls inside itself, never
// the page.
function table(columns, rows, attrs) {
  return el(
    "div",
    { class: "scroll" },
    el(
      "table",
      attrs || {},
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", { class: c.num ? "num" : null, scope: "col" }, c.title)))),
      el(
        "tbody",
        {},
        rows.length
          ? rows.map((r) =>
              el(
                "tr",
                r.attrs || {},
                (r.cells || r).map((cell, i) => el("td", { class: columns[i] && columns[i].num ? "num" : null }, cell)),
              ),
            )
          : el("tr", {}, el("td", { colspan: columns.length, class: "muted" }, "None.")),
      ),
    ),
  );
}

function dl(pairs, attrs) {
  return el("dl", attrs || {}, pairs.filter(Boolean).map(([k, v, field]) => [el("dt", {}, k), el("dd", { "data-field": field || null }, v)]));
}

function problem(e) {
  const a = e && e.answer;
  if (!a) return el("p", { class: "fail", role: "alert" }, String(e && e.message ? e.message : e));
  return el(
    "p",
    { class: "fail", role: "alert", "data-error-code": a.code || "" },
    `${a.status || "no answer"}${a.code ? ` ${a.code}` : ""}: ${a.message || "the request failed"}`,
  );
}

// An action's answer, shown as the API gave it: the status, the error code on failure, the
// JSON body.
function answerBox(what, answer, extra) {
  return el(
    "div",
    { class: "answer", "data-ok": String(answer.ok), "data-status": String(answer.status), "data-action": what, role: "status" },
    el("div", {}, el("span", { class: "status" }, `${what}: ${answer.status || "no answer"}`), answer.ok ? " OK" : ""),
    answer.code ? el("div", {}, "code: ", el("code", { "data-code": answer.code }, answer.code), answer.message ? ` — ${answer.message}` : "") : null,
    extra || null,
    answer.body !== null && answer.body !== undefined ? el("pre", {}, JSON.stringify(answer.body, null, 2)) : null,
  );
}

// ---- job summaries -----------------------------------------------------------------------

// A run's summary (the job's own totals, as the API gives them) as a person reads it: the
// error first, then the few numbers an operator reads first (the job's headline), then every
// other field folded, nested objects as labelled rows. A job or a field this page does not
// know is shown folded all the same, never dropped; a failure count above zero anywhere is
// raised into the headline.
//
// A headline item: `n`, the paths of a count (added up; `x.*` adds up every value under x);
// `bytes`, those of its size, shown beside it; `list`, the path of a list shown when not
// empty (an empty one stays folded); `bad`, a count that is a failure when above zero. An
// item whose paths the summary lacks is left out of the headline (its fields stay folded).
const HEADLINES = {
  sweep: [
    { n: ["deleted_versions"], bytes: ["deleted_bytes"], label: "versions deleted" },
    { n: ["settled_tmp.versions_deleted"], label: "settled tmp versions deleted" },
    { n: ["skipped_keys"], label: "keys skipped" },
    { n: ["failed_versions"], label: "versions failed", bad: true },
    { list: "future_partitions", label: "partitions dated in the future", bad: true },
  ],
  hygiene: [
    { n: ["unlinked"], label: "unlinked" },
    { n: ["archived"], bytes: ["archived_bytes"], label: "archived" },
    { n: ["deleted"], bytes: ["deleted_bytes"], label: "deleted" },
    { n: ["blocked"], label: "blocked" },
    { n: ["failed"], label: "failed", bad: true },
  ],
  reconcile: [
    { n: ["missing"], bytes: ["missing_bytes"], label: "missing", bad: true },
    { n: ["unindexed"], bytes: ["unindexed_bytes"], label: "unindexed" },
    { n: ["stray"], bytes: ["stray_bytes"], label: "stray" },
    { n: ["keys_listed"], label: "keys listed" },
  ],
  prune: [
    { n: ["uploads.committed", "uploads.rejected", "uploads.expired"], label: "upload rows" },
    { n: ["events"], label: "events" },
    { n: ["job_runs"], label: "job runs" },
    { n: ["discarded_deliveries.*"], label: "deliveries discarded" },
    { n: ["link_scans.superseded", "link_scans.abandoned"], label: "link scans" },
  ],
  legacy_import: [
    { n: ["imported"], label: "imported" },
    { n: ["committed"], label: "committed" },
    { n: ["refused"], label: "refused" },
    { n: ["failed"], label: "failed", bad: true },
    { n: ["retry_later"], label: "to retry later" },
  ],
};

const isPlain = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
// An object with fields, or a list holding objects: shown as rows of its own.
const isNested = (v) => (Array.isArray(v) ? v.some((x) => x !== null && typeof x === "object") : isPlain(v) && Object.keys(v).length > 0);
const humanKey = (k) => (/^\d+$/.test(k) ? `#${Number(k) + 1}` : k.replace(/_/g, " "));

// Every leaf of the summary by path ("recovery.commits_failed").
function summaryLeaves(value, prefix, out) {
  for (const [k, v] of Object.entries(value)) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (isNested(v)) summaryLeaves(v, path, out);
    else out.set(path, v);
  }
  return out;
}

// The value at a path; `x.*`: the sum of every number under x (undefined when x is no object).
function summarySum(leaves, paths) {
  let total = 0;
  for (const p of paths) {
    if (p.endsWith(".*")) {
      const under = p.slice(0, -1);
      const values = [...leaves].filter(([k]) => k.startsWith(under)).map(([, v]) => v);
      const empty = isPlain(leaves.get(p.slice(0, -2))) && !values.length;
      if (!(empty || values.length) || !values.every((v) => typeof v === "number")) return undefined;
      total += values.reduce((s, v) => s + v, 0);
    } else if (typeof leaves.get(p) === "number") total += leaves.get(p);
    else return undefined;
  }
  return total;
}

// One field's value as text: sizes in bytes with their exact count, durations in seconds
// with a readable form, times in UTC, lists joined.
function fieldText(key, v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") {
    if (/(^|_)bytes$/.test(key)) return v >= 1024 ? `${fmtBytes(v)} (${fmtCount(v)} bytes)` : fmtBytes(v);
    if (/_secs$/.test(key)) return v >= 60 ? `${fmtCount(v)} s (${fmtAge(v)})` : `${fmtCount(v)} s`;
    return fmtCount(v);
  }
  if (Array.isArray(v)) return v.length ? v.map((x) => fieldText("", x)).join(", ") : "none";
  if (typeof v === "object") return "none";
  if (typeof v === "string" && /^\d{4}-\d\d-\d\dT/.test(v)) return fmtTime(v);
  return String(v);
}

// The folded rows of `value` (a dl), leaving out what `shown(path)` says is shown already.
function fieldRows(value, prefix, shown) {
  const rows = [];
  for (const [k, v] of Object.entries(value)) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (shown(path)) continue;
    if (isNested(v)) {
      const inner = fieldRows(v, path, shown);
      if (inner.length) rows.push(el("dt", { class: "group" }, humanKey(k)), el("dd", { class: "group", "data-group": path }, el("dl", {}, inner)));
    } else {
      rows.push(el("dt", {}, humanKey(k)), el("dd", { "data-path": path }, fieldText(k, v)));
    }
  }
  return rows;
}

function summaryView(job, summaryIn) {
  let summary = summaryIn;
  if (typeof summary === "string") {
    try {
      summary = JSON.parse(summary);
    } catch {
      // Text, shown as it is.
    }
  }
  if (!isPlain(summary)) return el("div", { class: "summary", "data-summary": "" }, fieldText("", summary));
  const leaves = summaryLeaves(summary, "", new Map());
  const head = [];
  const headPaths = [];
  const figure = (paths, format, text) => el("span", { "data-paths": paths.join(","), "data-format": format }, text);
  for (const item of HEADLINES[job] || []) {
    if (item.list) {
      const v = leaves.get(item.list);
      if (!Array.isArray(v) || !v.length) continue;
      headPaths.push(item.list);
      head.push(el("li", { class: item.bad ? "fail" : null }, `${item.label}: `, figure([item.list], "list", v.join(", "))));
      continue;
    }
    const n = summarySum(leaves, item.n);
    if (n === undefined) continue;
    const size = item.bytes ? summarySum(leaves, item.bytes) : undefined;
    headPaths.push(...item.n, ...(size === undefined ? [] : item.bytes));
    head.push(el("li", { class: item.bad && n > 0 ? "fail" : n === 0 ? "muted" : null },
      figure(item.n, "count", fmtCount(n)), ` ${item.label}`,
      size === undefined ? null : [" (", figure(item.bytes, "bytes", fmtBytes(size)), ")"]));
  }
  // A failure counted anywhere else, above zero, is not left folded.
  for (const [path, v] of leaves) {
    if (typeof v === "number" && v > 0 && /failed/.test(path.split(".").pop()) && !headPaths.includes(path)) {
      headPaths.push(path);
      head.push(el("li", { class: "fail" }, figure([path], "count", fmtCount(v)), ` ${path.split(".").map(humanKey).join(" › ")}`));
    }
  }
  const error = typeof summary.error === "string" ? summary.error : null;
  const under = (p) => headPaths.some((h) => h.endsWith(".*") && p.startsWith(h.slice(0, -1)));
  const shown = (p) => headPaths.includes(p) || under(p) || (p === "error" && error !== null);
  const folded = fieldRows(summary, "", shown);
  const rest = [...leaves.keys()].filter((p) => !shown(p)).length;
  return el(
    "div",
    { class: "summary", "data-summary": "" },
    error !== null ? el("p", { class: "fail", "data-summary-error": "" }, `Error: ${error}`) : null,
    summary.dry_run === true ? el("div", { class: "muted" }, "Dry run: what it would do") : null,
    head.length ? el("ul", { class: "headline" }, head) : null,
    folded.length ? el("details", {}, el("summary", {}, `${head.length ? "More" : "Totals"} (${rest} ${rest === 1 ? "field" : "fields"})`), el("dl", {}, folded)) : null,
    !error && !head.length && !folded.length ? el("span", { class: "muted" }, "nothing counted") : null,
  );
}

// ---- charts (inline SVG) -----------------------------------------------------------------

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// Horizontal bars, one row per entry: the name, the bar, and the value as text.
function barChart(caption, rows, format, attrs) {
  const W = 340;
  const ROW = 22;
  const LABEL = 108;
  const VALUE = 74;
  const max = Math.max(1, ...rows.map((r) => r.value || 0));
  const height = Math.max(1, rows.length) * ROW + 4;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${height}`, width: W, role: "img", "aria-label": caption });
  if (!rows.length) svg.append(svgEl("text", { x: 0, y: 15, class: "muted" }, "nothing yet"));
  rows.forEach((r, i) => {
    const y = i * ROW + 2;
    const width = r.value > 0 ? Math.max(2, ((W - LABEL - VALUE) * r.value) / max) : 0;
    const text = format(r.value);
    const g = svgEl("g", { "data-name": r.name, "data-value": r.value });
    g.append(svgEl("title", {}, `${r.name}: ${text}`));
    const name = r.name.length > 17 ? `${r.name.slice(0, 16)}…` : r.name;
    g.append(svgEl("text", { x: 0, y: y + 14, class: "label" }, name));
    g.append(svgEl("rect", { x: LABEL, y: y + 3, width, height: ROW - 8, rx: 2, class: "bar" }));
    g.append(svgEl("text", { x: LABEL + width + 4, y: y + 14, class: "value" }, text));
    svg.append(g);
  });
  return el("figure", attrs || {}, el("figcaption", {}, caption), svg);
}

// One dimension of the report ([{name, count, bytes}]) as two charts: bytes and objects.
function dimension(title, key, rows) {
  const sorted = [...(rows || [])].sort((a, b) => (b.bytes || 0) - (a.bytes || 0) || a.name.localeCompare(b.name));
  return [
    barChart(`${title}: bytes`, sorted.map((r) => ({ name: r.name, value: r.bytes })), fmtBytes, { "data-chart": `${key}.bytes` }),
    barChart(`${title}: objects`, sorted.map((r) => ({ name: r.name, value: r.count })), fmtCount, { "data-chart": `${key}.count` }),
  ];
}

// The report lists the days with uploads; the chart has a column for each of the 30 days up to
// the report's own (UTC), the others at zero.
function everyDay(days, generatedAt) {
  const byDay = new Map(days.map((d) => [d.day, d]));
  const end = new Date(generatedAt || Date.now());
  const out = [];
  for (let i = 29; i >= 0; i -= 1) {
    const day = new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth(), end.getUTCDate() - i)).toISOString().slice(0, 10);
    out.push(byDay.get(day) || { day, presigned: 0, committed: 0, committed_bytes: 0 });
  }
  return out;
}

// Uploads per day: a column per day, committed in front of presigned.
function perDayChart(days) {
  const W = 680;
  const H = 130;
  const BASE = 108;
  const n = Math.max(1, days.length);
  const step = W / n;
  const max = Math.max(1, ...days.map((d) => Math.max(d.presigned || 0, d.committed || 0)));
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: W, role: "img", "aria-label": "Uploads per day: presigned and committed" });
  days.forEach((d, i) => {
    const x = i * step + 1;
    const w = Math.max(1, step - 2);
    const g = svgEl("g", { "data-day": d.day, "data-presigned": d.presigned, "data-committed": d.committed });
    g.append(svgEl("title", {}, `${d.day}: ${fmtCount(d.presigned)} presigned, ${fmtCount(d.committed)} committed (${fmtBytes(d.committed_bytes)})`));
    const hp = ((d.presigned || 0) * (BASE - 4)) / max;
    const hc = ((d.committed || 0) * (BASE - 4)) / max;
    g.append(svgEl("rect", { x, y: BASE - hp, width: w, height: hp, class: "bar second" }));
    g.append(svgEl("rect", { x: x + w / 4, y: BASE - hc, width: w / 2, height: hc, class: "bar" }));
    svg.append(g);
  });
  svg.append(svgEl("line", { x1: 0, y1: BASE, x2: W, y2: BASE, stroke: "#9aa4ae" }));
  if (days.length) {
    svg.append(svgEl("text", { x: 0, y: H - 4 }, days[0].day));
    svg.append(svgEl("text", { x: W, y: H - 4, "text-anchor": "end" }, days[days.length - 1].day));
  }
  const total = (k) => days.reduce((s, d) => s + (d[k] || 0), 0);
  return el(
    "figure",
    { "data-chart": "uploads_per_day" },
    el("figcaption", {}, `Uploads per day (last ${days.length} days): presigned (light) and committed (dark)`),
    svg,
    el(
      "p",
      { "data-field": "uploads_total" },
      `${fmtCount(total("presigned"))} presigned, ${fmtCount(total("committed"))} committed, ${fmtBytes(total("committed_bytes"))} committed`,
    ),
    el(
      "details",
      {},
      el("summary", {}, "As a table"),
      table(
        [{ title: "Day" }, { title: "Presigned", num: true }, { title: "Committed", num: true }, { title: "Committed bytes", num: true }],
        days.filter((d) => d.presigned || d.committed).map((d) => [d.day, fmtCount(d.presigned), fmtCount(d.committed), fmtBytes(d.committed_bytes)]),
      ),
    ),
  );
}

// ---- pages -------------------------------------------------------------------------------

// A section filled by `fill` (async); its failure shows in it alone.
async function section(parent, title, key, fill) {
  const body = el("div", {});
  const s = el("section", { "data-section": key, "aria-busy": "true" }, el("h2", {}, title), body);
  parent.append(s);
  try {
    await fill(body);
  } catch (e) {
    body.replaceChildren(problem(e));
    s.dataset.failed = "true";
  }
  s.removeAttribute("aria-busy");
}

// Thrown when the session an action started in has ended before its answer came.
class SessionEnded extends Error {}

// The call, with the session's token at the time of the call; throws SessionEnded when the
// session is no longer that one once the answer is in (sign-out mid-action).
async function callInSession(method, path, body) {
  const token = session.token();
  const answer = await call(method, path, body);
  if (!token || session.token() !== token) throw new SessionEnded();
  return answer;
}

// Runs an action: its buttons disabled meanwhile, the page marked busy until the answer shows
// and the numbers it changes are read again.
async function acting(buttonsIn, work) {
  const buttons = [...buttonsIn.querySelectorAll("button")];
  buttons.forEach((b) => { b.disabled = true; });
  document.body.dataset.state = "acting";
  try {
    await work();
  } catch (e) {
    // Signed out (or in as someone else) while the action ran: its answer is nobody's now.
    if (!(e instanceof SessionEnded)) throw e;
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
    if (document.body.dataset.state === "acting") document.body.dataset.state = "ready";
  }
}

function heading(text) {
  return el("h1", { tabindex: "-1" }, text);
}

const STANDING_CLASS = { present: "pass", not_needed: "pass", accepted: "warn", refused: "fail" };

async function overviewPage(view) {
  view.append(heading("Overview"));
  await Promise.all([
    section(view, "Bucket", "bucket", async (body) => {
      const b = await load("/v1/admin/bucket");
      const verdictClass = { ok: "pass", failing: "fail", pending: "warn", disabled: "muted" }[b.verdict] || "";
      body.append(
        el("p", {}, "Bucket ", el("code", {}, b.bucket), ": ", el("span", { class: verdictClass, "data-field": "verdict" }, b.verdict),
          b.report ? ` (checked ${fmtTime(b.report.checked_at)})` : ""),
        el("h3", {}, "Checks"),
        table(
          [{ title: "Check" }, { title: "Result" }, { title: "Detail" }, { title: "Fix" }],
          ((b.report && b.report.results) || []).map((r) => ({
            attrs: { "data-check": r.check },
            cells: [el("code", {}, r.check), el("span", { class: r.ok ? "pass" : "fail" }, r.ok ? "pass" : "fail"), r.detail || "", r.fix || ""],
          })),
        ),
        el("h3", {}, "Store capabilities"),
        table(
          [{ title: "Capability" }, { title: "Standing" }, { title: "Found" }, { title: "What it keeps" }, { title: "Without it" }],
          (b.capabilities || []).map((c) => ({
            attrs: { "data-capability": c.capability },
            cells: [
              [el("code", {}, c.capability), c.what ? el("div", { class: "muted" }, c.what) : null],
              el("span", { class: STANDING_CLASS[c.standing] || "", "data-standing": c.standing }, c.standing.replace("_", " ")),
              c.finding ? [c.finding.found, c.finding.detail ? ` — ${c.finding.detail}` : ""].join("") : "",
              c.promise || "",
              c.without || "",
            ],
          })),
        ),
      );
    }),
    section(view, "Storage", "storage", async (body) => {
      const r = await load("/v1/admin/storage-report");
      body.append(
        el(
          "div",
          { class: "stats" },
          el("div", {}, el("div", { class: "muted" }, "Estimated monthly cost"),
            el("div", { class: "stat", "data-field": "estimated_monthly_cost" }, Number(r.estimated_monthly_cost).toFixed(2))),
          el("div", {}, el("div", { class: "muted" }, "Report"), el("div", {}, fmtTime(r.generated_at))),
        ),
        el(
          "p",
          { class: "muted" },
          "The cost is in the unit of UPCOMMIT_PRICE_PER_GIB (S3 list prices, USD, by default) per month.",
        ),
        el("div", { class: "cards" }, dimension("By status", "by_status", r.by_status), dimension("By storage class", "by_storage_class", r.by_storage_class), dimension("By profile", "by_profile", r.by_profile)),
        el("h3", {}, "tmp backlog by age"),
        el(
          "div",
          { class: "cards" },
          barChart("tmp by age: bytes", (r.tmp_by_age || []).map((t) => ({ name: AGE_LABELS[t.age] || t.age, value: t.bytes })), fmtBytes, { "data-chart": "tmp_by_age.bytes" }),
          barChart("tmp by age: objects", (r.tmp_by_age || []).map((t) => ({ name: AGE_LABELS[t.age] || t.age, value: t.objects })), fmtCount, { "data-chart": "tmp_by_age.objects" }),
        ),
        el("h3", {}, "Uploads per day"),
        perDayChart(everyDay(r.uploads_per_day || [], r.generated_at)),
      );
    }),
    section(view, "Event outbox", "outbox", async (body) => {
      const { webhooks } = await load("/v1/admin/webhooks");
      const depth = webhooks.reduce((s, w) => s + (w.pending || 0), 0);
      const failed = webhooks.reduce((s, w) => s + (w.failed || 0), 0);
      const oldest = webhooks.map((w) => w.oldest_undelivered_at).filter(Boolean).sort()[0] || null;
      body.append(
        el(
          "div",
          { class: "stats" },
          el("div", {}, el("div", { class: "muted" }, "Depth (pending)"), el("div", { class: "stat", "data-field": "outbox_depth" }, fmtCount(depth))),
          el("div", {}, el("div", { class: "muted" }, "Failed"), el("div", { class: `stat ${failed ? "fail" : ""}`, "data-field": "outbox_failed" }, fmtCount(failed))),
          el("div", {}, el("div", { class: "muted" }, "Oldest undelivered"),
            el("div", { class: "stat", "data-field": "outbox_oldest" }, oldest ? fmtAge(ageSince(oldest)) : "none")),
        ),
        table(
          [{ title: "Endpoint" }, { title: "Enabled" }, { title: "Pending", num: true }, { title: "Failed", num: true }, { title: "Oldest undelivered" }],
          webhooks.map((w) => ({
            attrs: { "data-endpoint": w.id },
            cells: [link(`#/events/${enc(w.id)}`, w.id), w.enabled ? "yes" : "no", fmtCount(w.pending),
              el("span", { class: w.failed ? "fail" : "" }, fmtCount(w.failed)), w.oldest_undelivered_at ? fmtAge(ageSince(w.oldest_undelivered_at)) : "–"],
          })),
        ),
      );
    }),
    section(view, "Jobs", "jobs", async (body) => {
      const { jobs } = await load("/v1/admin/jobs");
      body.append(jobsTable(jobs));
    }),
  ]);
}

function jobsTable(jobs) {
  return table(
    [{ title: "Job" }, { title: "Last run" }, { title: "Summary" }, { title: "Next due" }],
    jobs.map((j) => ({
      attrs: { "data-job": j.job },
      cells: [
        j.job,
        j.last_run
          ? [el("span", { class: runClass(j.last_run.state) }, j.last_run.state), " ", fmtTime(j.last_run.finished_at || j.last_run.started_at), " ",
            link(`#/jobs/${enc(j.last_run.id)}`, "findings")]
          : "never",
        j.last_run ? summaryView(j.job, j.last_run.summary) : "–",
        // The schedule in the API's words (every N s, after each sweep, the operator's),
        // with the next run's time once a run has ended.
        j.next_due_at ? [fmtTime(j.next_due_at), " ", el("span", { class: "muted" }, j.schedule)] : j.schedule,
      ],
    })),
  );
}

const runClass = (state) => ({ finished: "pass", failed: "fail", refused: "warn", running: "muted" }[state] || "");

// Files: the search form (kept in the hash, so back and reload keep it) and a page of results.
const STATUSES = ["available", "unlinked", "archived", "deleted", "expired"];

async function filesPage(view, params) {
  view.append(heading("Files"));
  const field = (name, label, attrs) =>
    el("div", {}, el("label", { for: `f-${name}` }, label), el("input", { id: `f-${name}`, name, value: params.get(name) || "", ...(attrs || {}) }));
  const status = el("select", { id: "f-status", name: "status" }, el("option", { value: "" }, "any"),
    STATUSES.map((s) => el("option", { value: s, selected: params.get("status") === s }, s)));
  const form = el(
    "form",
    { id: "file-search", role: "search" },
    el("div", { class: "row" },
      field("id", "File id", { spellcheck: "false" }),
      field("owner", "Owner"),
      field("key_prefix", "Key prefix", { spellcheck: "false" }),
      el("div", {}, el("label", { for: "f-status" }, "Status"), status),
      field("profile", "Profile")),
    el("div", { class: "actions" }, el("button", { type: "submit" }, "Search")),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const data = Object.fromEntries(new FormData(form).entries());
    location.hash = `#/files${q({ ...data, limit: params.get("limit") || "" })}`;
  });
  view.append(form);
  const filters = {};
  for (const k of ["id", "owner", "key_prefix", "status", "profile", "before", "limit"]) filters[k] = params.get(k) || "";
  await section(view, "Results", "results", async (body) => {
    const { files, next_before: next } = await load(`/v1/admin/files${q({ ...filters, limit: filters.limit || 50 })}`);
    body.append(
      table(
        [{ title: "File" }, { title: "Owner" }, { title: "Key" }, { title: "Status" }, { title: "Profile" }, { title: "Size", num: true }, { title: "Created" }],
        files.map((f) => ({
          attrs: { "data-file": f.id },
          cells: [link(`#/files/${enc(f.id)}`, f.id, { class: "mono" }), f.created_by, el("code", {}, f.key), f.status, f.profile, fmtBytes(f.size), fmtTime(f.created_at)],
        })),
        { "data-table": "files" },
      ),
    );
    const nav = el("div", { class: "actions" });
    if (filters.before) nav.append(link(`#/files${q({ ...filters, before: "" })}`, "First page"));
    if (next) nav.append(link(`#/files${q({ ...filters, before: next })}`, "Next page", { "data-next": next }));
    body.append(nav);
  });
}

async function filePage(view, id) {
  view.append(heading(`File ${id}`));
  const answers = el("div", { id: "answers", "aria-live": "polite" });
  const details = el("div", {});
  const actions = el(
    "div",
    { class: "actions" },
    el("button", { type: "button", id: "action-download", onclick: () => act("Download", () => callInSession("GET", `/v1/files/${enc(id)}/download-url`), downloadExtra) }, "Download"),
    el("button", { type: "button", id: "action-restore", class: "secondary", onclick: () => act("Restore", () => callInSession("POST", `/v1/files/${enc(id)}/restore`)) }, "Restore"),
    el("button", { type: "button", id: "action-copy", class: "secondary", onclick: () => act("Copy", () => callInSession("POST", `/v1/files/${enc(id)}/copies`, {}), copyExtra) }, "Copy"),
  );
  view.append(el("p", { class: "muted" }, "Each action is the API call a client makes, with this console's token; its answer shows below."), actions, answers, details);

  async function act(what, request, extra) {
    await acting(actions, async () => {
      const answer = await request();
      if (endsSession(answer)) return refused(answer);
      answers.prepend(answerBox(what, answer, answer.ok && extra ? extra(answer.body) : null));
      return fill();
    });
  }

  async function fill() {
    const fresh = el("div", {});
    await section(fresh, "Handle", "file", async (body) => {
      const d = await load(`/v1/admin/files/${enc(id)}`);
      const f = d.file;
      body.append(
        dl([
          ["Id", el("code", {}, f.id), "id"],
          ["Status", f.status, "status"],
          ["Owner", f.created_by, "owner"],
          ["Key", el("code", {}, f.key), "key"],
          ["Size", `${fmtBytes(f.size)} (${fmtCount(f.size)} bytes)`, "size"],
          ["Content type", f.content_type, "content_type"],
          f.image ? ["Dimensions", `${f.image.width} × ${f.image.height} px`, "image"] : null,
          f.image && d.variants.length
            ? ["Renditions", el("span", {}, ...d.variants.map((name) =>
              el("button", { type: "button", class: "secondary", "data-variant": name, onclick: () => act(`Rendition ${name}`, () => callInSession("GET", `/v1/files/${enc(id)}/variants/${enc(name)}`), renditionExtra) }, name))), "variants"]
            : null,
          ["Profile", f.profile, "profile"],
          ["Created", fmtTime(f.created_at), "created_at"],
          f.original_filename ? ["Original filename", f.original_filename, "original_filename"] : null,
          f.checksum ? ["Checksum", el("code", {}, `${f.checksum.algorithm} ${f.checksum.value}`), "checksum"] : null,
          f.copied_from ? ["Copied from", link(`#/files/${enc(f.copied_from)}`, f.copied_from, { class: "mono" }), "copied_from"] : null,
          f.expires_at ? ["Expires", fmtTime(f.expires_at), "expires_at"] : null,
          ["Upload", el("code", {}, f.upload_id), "upload_id"],
          ["ETag", el("code", {}, f.etag), "etag"],
        ], { "data-handle": f.id }),
        // Variants refused because a render killed its worker or timed out twice (issue 46).
        ...(d.render_failures.length
          ? [
            el("h3", {}, `Refused renders (${d.render_failures.length})`),
            table(
              [{ title: "Variant" }, { title: "Cause" }, { title: "In a row" }, { title: "Last" }],
              d.render_failures.map((r) => ({ attrs: { "data-render-failure": r.variant }, cells: [r.variant, r.cause, fmtCount(r.count), fmtTime(r.last_at)] })),
              { "data-table": "render-failures" },
            ),
            el("button", { type: "button", id: "action-clear-render-failures", class: "secondary", onclick: () => act("Clear refused renders", () => callInSession("DELETE", `/v1/admin/files/${enc(id)}/render-failures`)) }, "Clear refused renders"),
          ]
          : []),
        el("h3", {}, `Copies (${d.copies.length})`),
        table(
          [{ title: "File" }, { title: "Owner" }, { title: "Status" }, { title: "Created" }],
          d.copies.map((c) => ({ attrs: { "data-copy": c.id }, cells: [link(`#/files/${enc(c.id)}`, c.id, { class: "mono" }), c.created_by, c.status, fmtTime(c.created_at)] })),
          { "data-table": "copies" },
        ),
        el("h3", {}, `Links (${d.links.length})`),
        table(
          [{ title: "Object type" }, { title: "Object id" }, { title: "Linked" }],
          d.links.map((l) => ({ attrs: { "data-link": `${l.object_type}/${l.object_id}` }, cells: [l.object_type, l.object_id, fmtTime(l.created_at)] })),
          { "data-table": "links" },
        ),
        el("h3", {}, `Events (${d.events.length})`),
        table(
          [{ title: "When" }, { title: "Type" }, { title: "Event" }, { title: "Cursor" }],
          d.events.map((e) => ({ attrs: { "data-event": e.id }, cells: [fmtTime(e.timestamp), e.type, el("code", {}, e.id), el("code", {}, e.cursor)] })),
          { "data-table": "events" },
        ),
      );
    });
    details.replaceChildren(...fresh.childNodes);
  }
  await fill();
}

// A rendition, shown from its presigned URL (only an http(s) URL becomes an image; the page's
// policy allows images from the bucket's origin and nowhere else).
function renditionExtra(body) {
  const url = body && body.url;
  if (typeof url !== "string" || !/^https?:\/\//i.test(url)) return null;
  return el("p", {}, el("img", { src: url, id: "rendition-image", alt: `The ${body.variant} rendition`, width: String(body.width), height: String(body.height), "data-variant": body.variant }));
}

// The download URL, as a link that fetches the file (only an http(s) URL becomes a link). The
// store answers it with `Content-Disposition: attachment`, so the browser saves the file and
// the console stays where it is.
function downloadExtra(body) {
  const url = body && body.url;
  if (typeof url !== "string" || !/^https?:\/\//i.test(url)) return null;
  return el("p", {}, link(url, `Download the file (the URL is valid for ${body.expires_in} s)`, { rel: "noopener noreferrer", id: "download-link" }));
}

function copyExtra(body) {
  if (!body || typeof body.id !== "string") return null;
  return el("p", {}, "New file: ", link(`#/files/${enc(body.id)}`, body.id, { class: "mono", "data-new-file": body.id }));
}

// Events: every endpoint's counts; one endpoint's failed deliveries and its actions.
async function eventsPage(view, endpoint, params) {
  view.append(heading(endpoint ? `Events: ${endpoint}` : "Events"));
  const answers = el("div", { id: "answers", "aria-live": "polite" });
  const list = el("div", {});
  const deliveries = el("div", {});

  async function fillList() {
    const fresh = el("div", {});
    await section(fresh, "Endpoints", "endpoints", async (body) => {
      const { webhooks } = await load("/v1/admin/webhooks");
      body.append(
        table(
          [{ title: "Endpoint" }, { title: "Kind" }, { title: "URL" }, { title: "Source" }, { title: "Enabled" },
            { title: "Pending", num: true }, { title: "Failed", num: true }, { title: "Delivered", num: true }, { title: "Oldest undelivered" }],
          webhooks.map((w) => ({
            attrs: { "data-endpoint": w.id, "aria-current": w.id === endpoint ? "true" : null },
            cells: [link(`#/events/${enc(w.id)}`, w.id), w.kind, el("code", {}, w.url), w.source, w.enabled ? "yes" : "no",
              el("span", { "data-count": "pending" }, fmtCount(w.pending)),
              el("span", { "data-count": "failed", class: w.failed ? "fail" : "" }, fmtCount(w.failed)),
              el("span", { "data-count": "delivered" }, fmtCount(w.delivered)),
              w.oldest_undelivered_at ? fmtAge(ageSince(w.oldest_undelivered_at)) : "–"],
          })),
          { "data-table": "endpoints" },
        ),
      );
    });
    list.replaceChildren(...fresh.childNodes);
  }

  async function fillDeliveries() {
    const fresh = el("div", {});
    const after = params.get("after") || "";
    await section(fresh, "Failed deliveries", "deliveries", async (body) => {
      const d = await load(`/v1/admin/webhooks/${enc(endpoint)}/deliveries${q({ state: "failed", after, limit: 50 })}`);
      body.append(
        table(
          [{ title: "Cursor" }, { title: "Type" }, { title: "Subject" }, { title: "Attempts", num: true }, { title: "Last status" }, { title: "Last error" }, { title: "Created" }],
          d.deliveries.map((x) => ({
            attrs: { "data-delivery": x.event_id },
            cells: [el("code", {}, x.cursor), x.type, el("code", {}, x.subject || ""), fmtCount(x.attempts),
              x.last_status === null || x.last_status === undefined ? "no answer" : String(x.last_status), x.last_error || "", fmtTime(x.created_at)],
          })),
          { "data-table": "deliveries" },
        ),
      );
      if (d.next_after) body.append(el("div", { class: "actions" }, link(`#/events/${enc(endpoint)}${q({ after: d.next_after })}`, "More failed deliveries")));
    });
    deliveries.replaceChildren(...fresh.childNodes);
  }

  view.append(list);
  if (endpoint) {
    const cursor = el("input", { id: "replay-after", spellcheck: "false", placeholder: "a feed cursor (GET /v1/events' cursor); empty: from the start" });
    const disableConfirm = el(
      "div",
      { class: "answer", id: "disable-confirm", hidden: true },
      el("p", {}, `Disable ${endpoint}? No more events are sent to it; its deliveries are kept.`),
      el("div", { class: "actions" },
        el("button", { type: "button", class: "danger", id: "action-disable-confirm", onclick: () => { disableConfirm.hidden = true; act("Disable", () => callInSession("DELETE", `/v1/admin/webhooks/${enc(endpoint)}`)); } }, `Disable ${endpoint}`),
        el("button", { type: "button", class: "secondary", onclick: () => { disableConfirm.hidden = true; $("action-disable").focus(); } }, "Cancel")),
    );
    const actions = el(
      "div",
      {},
      el("h2", {}, "Actions"),
      el("div", { class: "actions" },
        el("button", { type: "button", id: "action-retry", onclick: () => act("Retry", () => callInSession("POST", `/v1/admin/webhooks/${enc(endpoint)}/retry`)) }, "Retry failed deliveries"),
        el("button", { type: "button", class: "secondary", id: "action-disable", onclick: () => { disableConfirm.hidden = false; $("action-disable-confirm").focus(); } }, "Disable…")),
      el("div", { class: "row" },
        el("div", {}, el("label", { for: "replay-after" }, "Replay every event after this cursor"), cursor),
        el("div", { style: "flex: 0 0 auto" }, el("button", { type: "button", class: "secondary", id: "action-replay",
          onclick: () => act("Replay", () => callInSession("POST", `/v1/admin/webhooks/${enc(endpoint)}/replay`, { after: cursor.value.trim() })) }, "Replay"))),
      disableConfirm,
    );
    view.append(actions, answers, deliveries);

    async function act(what, request) {
      await acting(actions, async () => {
        const answer = await request();
        if (endsSession(answer)) return refused(answer);
        answers.prepend(answerBox(what, answer));
        return Promise.all([fillList(), fillDeliveries()]);
      });
    }
    await Promise.all([fillList(), fillDeliveries()]);
  } else {
    view.append(el("p", { class: "muted" }, "Pick an endpoint for its failed deliveries and the actions retry, replay and disable."));
    await fillList();
  }
}

// Jobs: the history of runs (newest first), each job's last run and next, one run's findings,
// and hygiene's dry run.
const JOBS = ["sweep", "hygiene", "reconcile", "prune", "legacy_import"];

async function jobsPage(view, params) {
  view.append(heading("Jobs"));
  const job = params.get("job") || "";
  const before = params.get("before") || "";
  const limit = params.get("limit") || "";
  const answers = el("div", { id: "answers", "aria-live": "polite" });
  const select = el("select", { id: "job-filter" }, el("option", { value: "" }, "every job"), JOBS.map((j) => el("option", { value: j, selected: j === job }, j)));
  // Applied with its button, not on each change: arrow keys move through the options without
  // leaving the list (review 37).
  const filter = el("form", { class: "row", id: "job-filter-form" },
    el("div", {}, el("label", { for: "job-filter" }, "Show runs of"), select),
    el("div", { style: "flex: 0 0 auto" }, el("button", { type: "submit", class: "secondary", id: "job-filter-show" }, "Show")));
  filter.addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = `#/jobs${q({ job: select.value })}`;
  });
  const dry = el("button", { type: "button", id: "action-hygiene-dry-run" }, "Hygiene dry run");
  view.append(
    filter,
    el("div", { class: "row" },
      el("div", { style: "flex: 0 0 auto" }, dry)),
    el("p", { class: "muted" }, "The dry run lists what hygiene's next run would do, and changes nothing."),
    answers,
  );
  const history = el("div", {});
  view.append(history);

  async function fillHistory() {
    const fresh = el("div", {});
    await section(fresh, "Runs", "runs", async (body) => {
      const { runs, next_before: next } = await load(`/v1/admin/jobs/runs${q({ job, before, limit: limit || 25 })}`);
      body.append(runsTable(runs));
      const nav = el("div", { class: "actions" });
      if (before) nav.append(link(`#/jobs${q({ job, limit })}`, "Newest runs"));
      if (next) nav.append(link(`#/jobs${q({ job, before: next, limit })}`, "Older runs", { "data-next": next }));
      body.append(nav);
    });
    await section(fresh, "Each job", "schedule", async (body) => {
      const { jobs } = await load("/v1/admin/jobs");
      body.append(jobsTable(jobs));
    });
    history.replaceChildren(...fresh.childNodes);
  }

  dry.addEventListener("click", () => acting(dry.parentElement, async () => {
    const answer = await callInSession("POST", "/v1/admin/jobs/hygiene/dry-run");
    if (endsSession(answer)) return refused(answer);
    const box = answerBox("Hygiene dry run", answer);
    answers.prepend(box);
    if (answer.ok && answer.body && answer.body.run_id) {
      const id = answer.body.run_id;
      const progress = el("div", { "data-field": "dry-run-progress" }, `Run ${id}: running…`);
      box.append(progress);
      const run = await waitForRun(id);
      progress.replaceChildren(
        "Run ", link(`#/jobs/${enc(id)}`, id, { class: "mono", "data-run-link": id }), ": ",
        el("span", { class: runClass(run && run.state), "data-field": "dry-run-state" }, run ? run.state : "unknown"),
        el("div", { "data-field": "dry-run-summary" }, run ? summaryView(run.job, run.summary) : "no answer"),
      );
    }
    return fillHistory();
  }));
  await fillHistory();
}

// Polls a run until it is not running (or a minute has passed); the last run read.
async function waitForRun(id) {
  const until = Date.now() + 60000;
  let last = null;
  while (Date.now() < until) {
    const a = await callInSession("GET", `/v1/admin/jobs/runs/${enc(id)}${q({ limit: 1 })}`);
    if (a.ok && a.body && a.body.run) {
      last = a.body.run;
      if (last.state !== "running") return last;
    } else if (endsSession(a)) {
      refused(a);
      return null;
    }
    await new Promise((r) => setTimeout(r, 400));
  }
  return last;
}

function runsTable(runs) {
  return table(
    [{ title: "Run" }, { title: "Job" }, { title: "Dry run" }, { title: "State" }, { title: "Started" }, { title: "Finished" }, { title: "Summary" }],
    runs.map((r) => ({
      attrs: { "data-run": r.id },
      cells: [link(`#/jobs/${enc(r.id)}`, r.id.slice(0, 12), { class: "mono", title: r.id }), r.job, r.dry_run ? "yes" : "no",
        el("span", { class: runClass(r.state) }, r.state), fmtTime(r.started_at), fmtTime(r.finished_at), summaryView(r.job, r.summary)],
    })),
    { "data-table": "runs" },
  );
}

async function runPage(view, id, params) {
  view.append(heading(`Run ${id}`));
  const after = params.get("after") || "";
  await section(view, "Findings", "run", async (body) => {
    const d = await load(`/v1/admin/jobs/runs/${enc(id)}${q({ after, limit: 100 })}`);
    const r = d.run;
    body.append(
      dl([
        ["Job", r.job, "job"],
        ["State", el("span", { class: runClass(r.state) }, r.state), "state"],
        ["Dry run", r.dry_run ? "yes" : "no", "dry_run"],
        ["Started", fmtTime(r.started_at), "started_at"],
        ["Updated", fmtTime(r.updated_at), "updated_at"],
        ["Finished", fmtTime(r.finished_at), "finished_at"],
      ], { "data-run": r.id }),
      el("h3", {}, "Summary"),
      el("div", { "data-field": "summary" }, summaryView(r.job, r.summary)),
      el("h3", {}, "Items"),
      table(
        [{ title: "Action" }, { title: "Key" }, { title: "Version" }, { title: "Size", num: true }, { title: "Reason" }],
        d.items.map((i) => ({ attrs: { "data-item": i.key }, cells: [i.action, el("code", {}, i.key), el("code", {}, i.version_id || ""), fmtBytes(i.bytes), i.reason || ""] })),
        { "data-table": "items" },
      ),
    );
    const nav = el("div", { class: "actions" }, link(`#/jobs${q({ job: r.job })}`, `Every ${r.job} run`));
    if (after) nav.append(link(`#/jobs/${enc(id)}`, "First findings"));
    if (d.next_after) nav.append(link(`#/jobs/${enc(id)}${q({ after: d.next_after })}`, "More findings"));
    body.append(nav);
  });
}

// ---- routing and the session's screens ---------------------------------------------------

// The ids a page's address may carry, in the forms the API gives them. Anything else (`..`,
// `.`, which fetch would resolve into another route's path) is refused before any call.
const FILE_ID = /^[0-9a-f]{32}$/;
const ENDPOINT_ID = /^[a-z0-9_-]{1,64}$/;
const RUN_ID = /^[0-9a-f]{32}$/;

function idOf(text, form, what) {
  let id = null;
  try {
    id = decodeURIComponent(text);
  } catch (_) {
    id = null;
  }
  if (id === null || !form.test(id)) throw new Error(`no such ${what}: the address names none`);
  return id;
}

const ROUTES = [
  [/^\/overview$/, "overview", (v) => overviewPage(v)],
  [/^\/files$/, "files", (v, p) => filesPage(v, p)],
  [/^\/files\/([^/]+)$/, "file", (v, p, m) => filePage(v, idOf(m[1], FILE_ID, "file id")) ],
  [/^\/events$/, "events", (v, p) => eventsPage(v, null, p)],
  [/^\/events\/([^/]+)$/, "endpoint", (v, p, m) => eventsPage(v, idOf(m[1], ENDPOINT_ID, "endpoint id"), p)],
  [/^\/jobs$/, "jobs", (v, p) => jobsPage(v, p)],
  [/^\/jobs\/([^/]+)$/, "run", (v, p, m) => runPage(v, idOf(m[1], RUN_ID, "run id"), p)],
];
const NAV_OF = { overview: "overview", files: "files", file: "files", events: "events", endpoint: "events", jobs: "jobs", run: "jobs" };

let renderCount = 0;

async function render() {
  if (!session.token()) {
    showSignIn();
    return;
  }
  const [path, query] = (location.hash.replace(/^#/, "") || "/overview").split("?");
  const route = ROUTES.find(([re]) => re.test(path));
  if (!route) {
    location.replace("#/overview");
    return;
  }
  const [re, name, draw] = route;
  const mine = ++renderCount;
  $("sign-in").hidden = true;
  $("nav").hidden = false;
  $("sign-out").hidden = false;
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === NAV_OF[name]) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.body.dataset.page = name;
  document.body.dataset.state = "loading";
  document.body.dataset.render = String(mine);
  const view = el("div", {});
  $("view").replaceChildren(view);
  try {
    await draw(view, new URLSearchParams(query || ""), path.match(re));
  } catch (e) {
    if (mine === renderCount && session.token()) view.append(problem(e));
  }
  // A later navigation, or a refused token, has replaced this page.
  if (mine !== renderCount || !session.token()) return;
  document.title = `upcommit admin — ${name}`;
  document.body.dataset.state = "ready";
}

function showSignIn(error) {
  renderCount += 1;
  $("view").replaceChildren();
  $("nav").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = error || "";
  document.body.dataset.page = "sign-in";
  document.body.dataset.state = error ? "refused" : "ready";
  document.title = "upcommit admin — sign in";
}

// A token the API refused: the session ends, and nothing but the reason stays on screen.
function refused(answer) {
  session.clear();
  const why = answer.code === "admin_required"
    ? "This token is not an admin's: the console needs an admin token."
    : "The token was refused (expired, malformed or not from this server's issuers).";
  showSignIn(`${why} (${answer.status} ${answer.code || ""})`);
}

$("sign-in-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const token = $("token").value.trim();
  $("token").value = "";
  if (!token) return;
  // A bearer token is printable ASCII without spaces; anything else the browser could not
  // even send (review 37: it was kept, and every call failed as "network").
  if (!TOKEN_FORM.test(token)) {
    showSignIn("That is not a token: a token is printable ASCII without spaces.");
    return;
  }
  session.set(token);
  $("sign-in-error").textContent = "";
  if (!location.hash || location.hash === "#" || location.hash === "#/") location.hash = "#/overview";
  else render();
});

$("sign-out").addEventListener("click", () => {
  session.clear();
  showSignIn();
  $("token").focus();
});

window.addEventListener("hashchange", render);
// Moving to another page puts the keyboard focus on its title.
window.addEventListener("hashchange", () => {
  const h = document.querySelector("#view h1");
  if (h) h.focus({ preventScroll: true });
});

// ---- signing in through the identity provider ------------------------------------------------

// With UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID, `/admin/config` names the provider's issuer and this
// console's client id there: the authorization code flow with PKCE (S256), all in this tab.
// The verifier and the state wait in sessionStorage while the browser is at the provider; the
// answer is taken only with the state this tab sent, and the code leaves the address bar at
// once. The token endpoint's answer is the same kind of token a pasted one is: the API checks
// it (issuer, audience, admin claim), the page does not.
const OIDC_KEY = "upcommit.console.oidc";

function b64url(bytes) {
  let text = "";
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomText() {
  const bytes = new Uint8Array(32);
  crypto.getRandomValues(bytes);
  return b64url(bytes);
}

const redirectUri = () => `${location.origin}/admin`;

// The provider's endpoints, from its discovery document, which must name the same issuer.
async function discover(issuer) {
  const resp = await fetch(`${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`, { cache: "no-store" });
  if (!resp.ok) throw new Error(`the identity provider's discovery document answered ${resp.status}`);
  const doc = await resp.json();
  if (doc.issuer !== issuer) throw new Error("the discovery document names another issuer");
  for (const k of ["authorization_endpoint", "token_endpoint"]) {
    const u = new URL(doc[k]);
    if (u.protocol !== "https:" && u.protocol !== "http:") throw new Error(`${k} is not an http(s) URL`);
  }
  // The page's security policy lets it talk to the issuer's origin only: a token endpoint
  // elsewhere is refused here, before the browser leaves for the provider (review 38: the code
  // was spent and the request then blocked).
  if (new URL(doc.token_endpoint).origin !== new URL(issuer).origin) {
    throw new Error(`its token endpoint (${new URL(doc.token_endpoint).origin}) is not on the issuer's origin, the only one this page may call`);
  }
  return doc;
}

async function startProviderSignIn(signIn) {
  const doc = await discover(signIn.issuer);
  const verifier = randomText();
  const state = randomText();
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  sessionStorage.setItem(OIDC_KEY, JSON.stringify({ verifier, state, hash: location.hash }));
  const url = new URL(doc.authorization_endpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", signIn.client_id);
  url.searchParams.set("redirect_uri", redirectUri());
  url.searchParams.set("scope", signIn.scope);
  url.searchParams.set("state", state);
  url.searchParams.set("code_challenge", challenge);
  url.searchParams.set("code_challenge_method", "S256");
  location.assign(url.toString());
}

// Back from the provider (`?code=…&state=…` or `?error=…`): the token, or why not. Returns an
// error text, or null when signed in or when this load is no answer from the provider.
async function finishProviderSignIn(signIn) {
  const params = new URLSearchParams(location.search);
  if (!params.has("code") && !params.has("error")) return null;
  if (!signIn) {
    // No provider sign-in here: whatever the address carries is dropped, never shown.
    history.replaceState(null, "", `/admin${location.hash}`);
    return null;
  }
  // An answer from the provider starts a new session: the one this tab had ends first, so the
  // sign-in screen never hides a token still kept (review 37).
  session.clear();
  let pending = null;
  try {
    pending = JSON.parse(sessionStorage.getItem(OIDC_KEY) || "null");
  } catch (_) {
    pending = null;
  }
  sessionStorage.removeItem(OIDC_KEY);
  const hash = pending && typeof pending.hash === "string" && pending.hash.startsWith("#/") ? pending.hash : "#/overview";
  history.replaceState(null, "", `/admin${hash}`);
  if (params.has("error")) {
    // Only an OAuth error code is shown, never free text from the address (review 37: a link
    // could put any sentence on this page).
    const code = params.get("error");
    return `The identity provider did not sign you in${/^[a-z_]{1,64}$/.test(code) ? ` (${code})` : ""}.`;
  }
  if (!pending || params.get("state") !== pending.state) {
    return "This answer is not from the sign-in this tab started (its state does not match): ignored.";
  }
  const doc = await discover(signIn.issuer);
  const form = new URLSearchParams({
    grant_type: "authorization_code",
    code: params.get("code") || "",
    redirect_uri: redirectUri(),
    client_id: signIn.client_id,
    code_verifier: pending.verifier,
  });
  const resp = await fetch(doc.token_endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: form,
    cache: "no-store",
  });
  const answer = await resp.json().catch(() => ({}));
  if (!resp.ok || typeof answer.access_token !== "string") {
    // As for `?error=`: only an OAuth error code is shown, never the provider's free text.
    const code = typeof answer.error === "string" && /^[a-z_]{1,64}$/.test(answer.error) ? ` ${answer.error}` : "";
    return `The identity provider gave no token (${resp.status}${code}).`;
  }
  // What a pasted token must be, a provider's too (review 38).
  if (!TOKEN_FORM.test(answer.access_token)) {
    return "The identity provider's answer is not a token a request can carry (printable ASCII without spaces).";
  }
  session.set(answer.access_token);
  return null;
}

async function start() {
  let signIn = null;
  try {
    const resp = await fetch("/admin/config", { cache: "no-store" });
    if (resp.ok) signIn = (await resp.json()).sign_in || null;
  } catch (_) {
    signIn = null;
  }
  if (signIn) {
    $("provider-sign-in").hidden = false;
    $("provider-issuer").textContent = signIn.issuer;
    $("provider-button").addEventListener("click", () => {
      startProviderSignIn(signIn).catch((e) => showSignIn(`Cannot reach the identity provider: ${e.message || e}`));
    });
  }
  let error = null;
  try {
    error = await finishProviderSignIn(signIn);
  } catch (e) {
    error = `Signing in through the identity provider failed: ${e.message || e}`;
  }
  if (error) showSignIn(error);
  else render();
}

start();
