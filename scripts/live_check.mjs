// Opens a running loadmix dashboard in headless Chromium (Debian's, driven by
// playwright-core) and fails unless: the page logs no console error and makes no request
// beyond its own server; its throughput chart gains points while the run goes; once the
// run is over it says so, links the report, its measured totals equal run.json's and its
// threshold verdicts the report's, it charts the watched server's CPU and each
// operation, and shades the fault windows; and a page opened only then draws the whole
// run from the run's own history, its fault windows shaded too.
// Usage: node live_check.mjs URL RUN.json SCREENSHOT.png
import { chromium } from "playwright-core";
import fs from "node:fs";

const [url, runJson, shot] = process.argv.slice(2);
const origin = new URL(url).origin;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const page = await browser.newPage({ viewport: { width: 1100, height: 1000 } });
const problems = [];
page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()}`); });
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
page.on("request", (r) => { if (!r.url().startsWith(origin)) problems.push(`request leaving the server: ${r.url()}`); });
await page.goto(url, { waitUntil: "load" });

const points = () => page.evaluate(() => {
  const l = document.querySelector('figure[data-chart="throughput"] polyline');
  return l ? Number(l.getAttribute("data-points")) : 0;
});
const state = () => page.evaluate(() => ({
  finished: document.getElementById("done").hasAttribute("data-finished"),
  gone: document.body.hasAttribute("data-gone"),
}));
// The chart gains points while the run goes: seen at two polls a few seconds apart.
// The run itself is bounded (two 5 s rounds), so every wait here ends with it.
let first = 0;
while ((first = await points()) < 2) {
  if ((await state()).finished) break;
  await page.waitForTimeout(250);
}
// What the page says is left, against when the run then ends (set-up between rounds and
// the report's writing are not in the estimate: a few seconds at most).
const said = await page.evaluate(() => ({
  states: document.getElementById("states").textContent,
  sub: document.getElementById("sub").textContent,
}));
const leftSaid = /about ([0-9.]+) s left/.exec(said.states);
const sinceThen = /([0-9.]+) s since start/.exec(said.sub);
await page.waitForTimeout(2500);
const second = await points();
if (!(second > first)) problems.push(`throughput chart did not gain points: ${first} then ${second}`);
for (const c of ["throughput", "latency", "failures", "users"]) {
  const n = await page.locator(`figure[data-chart="${c}"] svg polyline`).count();
  if (n < 1) problems.push(`chart ${c}: nothing drawn`);
}
if ((await page.locator('figure[data-chart="heat"] svg rect').count()) < 1) problems.push("heat map: no cell drawn");
if ((await page.locator("#fails tbody tr").count()) < 1) problems.push("first failures: table not drawn");
let s;
while (!(s = await state()).finished && !s.gone) await page.waitForTimeout(250);
if (!s.finished) problems.push("the page lost the run before it said the run was over");
else {
  // A page opened after the run (a reload, a late look, a screenshot) draws it from its
  // start: two 5 s rounds and their set-up are ten seconds of history or more.
  const late = await browser.newPage({ viewport: { width: 1100, height: 1000 } });
  late.on("pageerror", (e) => problems.push(`late page error: ${e.message}`));
  await late.goto(url, { waitUntil: "load" });
  await late.waitForSelector("#total", { state: "attached" });
  // The users chart has a point every second; the throughput's rate now has none in a
  // round's first seconds (no whole, settled second yet).
  const drawn = await late.evaluate(() => {
    const l = document.querySelector('figure[data-chart="users"] polyline');
    return l ? Number(l.getAttribute("data-points")) : 0;
  });
  if (!(drawn >= 10)) problems.push(`a page opened after the run drew ${drawn} points of it`);
  else console.log(`   a page opened after the run drew ${drawn} points of its history`);
  // Each round's fault window, shaded on the charts of a page that saw it and of one
  // drawn from the history.
  const shaded = (p) => p.locator('figure[data-chart="throughput"] svg rect.fault').count();
  const [live, later] = [await shaded(page), await shaded(late)];
  if (!(live >= 1 && later >= 2)) problems.push(`fault windows shaded: ${live} live, ${later} from the history (2 rounds)`);
  else console.log(`   fault windows shaded: ${live} on the live page, ${later} on one drawn from the history`);
  await late.close();
  const report = JSON.parse(fs.readFileSync(runJson, "utf8"));
  const total = await page.getAttribute("#total", "data-total-requests");
  const failed = await page.getAttribute("#total", "data-total-failed");
  const want = report.summary.total;
  if (Number(total) !== want.requests) problems.push(`dashboard total ${total}, run.json ${want.requests}`);
  if (Number(failed) !== want.failures) problems.push(`dashboard failures ${failed}, run.json ${want.failures}`);
  // The thresholds as the page judged them at the end, against the report's verdicts.
  const rules = await page.$$eval("#rules tbody tr[data-verdict]", (rows) =>
    rows.map((r) => ({ rule: r.children[1].textContent, now: r.children[2].textContent, verdict: r.getAttribute("data-verdict") })));
  for (const t of report.thresholds || []) {
    const seen = rules.find((x) => x.rule === `${t.op} ${t.rule}`);
    const want = t.passed ? "holds so far" : "broken";
    if (!seen) problems.push(`threshold ${t.op} ${t.rule}: not on the page`);
    else if (seen.verdict !== want) problems.push(`threshold ${t.op} ${t.rule}: page says ${seen.verdict} (${seen.now}), the report ${want} (${t.observed})`);
    else console.log(`   threshold ${t.op} ${t.rule}: ${seen.verdict} at ${seen.now}, the report ${t.observed}`);
    // Counts and rates come from the same totals as the report's (percentiles from buckets).
    const now = parseFloat(seen ? seen.now.replace(/,/g, "") : "NaN");
    if (/^(errors|ops_per_sec)/.test(t.rule) && !(Math.abs(now - t.observed) <= 0.02 * Math.abs(t.observed) + 0.01))
      problems.push(`threshold ${t.op} ${t.rule}: the page's figure ${now} is not the report's ${t.observed}`);
  }
  if (!(report.thresholds || []).length) problems.push("the run judged no threshold");
  // The watched server's CPU, charted; an operation's own charts.
  const server = await page.evaluate(() => {
    const f = document.getElementById("f-server");
    const l = f && f.querySelector("polyline");
    return f && !f.hidden && l ? Number(l.getAttribute("data-points")) : 0;
  });
  if (!(server >= 5)) problems.push(`watched server CPU chart: ${server} points`);
  const op = await page.evaluate(() => ({
    options: document.getElementById("op-pick").options.length,
    points: Number((document.querySelector('figure[data-chart="op-throughput"] polyline') || { getAttribute: () => 0 }).getAttribute("data-points")),
  }));
  if (!(op.options >= 2 && op.points >= 2)) problems.push(`per-operation charts: ${op.options} operations, ${op.points} points`);
  else console.log(`   server CPU chart: ${server} points; per-operation charts: ${op.options} operations, ${op.points} points for the first`);
  const r = await page.request.get(new URL("report", url).href);
  if (!r.ok() || !(await r.text()).includes("<svg")) problems.push(`/report: ${r.status()}, not the report page`);
  console.log(`   dashboard: ${second} points after ${first}; total ${total} requests = run.json's ${want.requests}`);
  const ended = /([0-9.]+) s since start/.exec(await page.textContent("#sub"));
  if (!leftSaid || !sinceThen || !ended) problems.push(`no time left shown: "${said.states}"`);
  else {
    const predicted = Number(sinceThen[1]) + Number(leftSaid[1]), actual = Number(ended[1]);
    console.log(`   time left: at ${sinceThen[1]} s it said ${leftSaid[1]} s; the run said it was over at ${actual} s (predicted ${predicted.toFixed(1)})`);
    if (Math.abs(actual - predicted) > 4) problems.push(`time left: predicted the end at ${predicted.toFixed(1)} s, it came at ${actual} s`);
  }
}
await page.screenshot({ path: shot, fullPage: true });
await browser.close();
if (problems.length) { console.log(`FAIL ${url}\n  ${problems.join("\n  ")}`); process.exit(1); }
console.log(`ok   dashboard (screenshot ${shot})`);
