// Opens loadmix HTML pages in headless Chromium (Debian's, driven by playwright-core) and
// fails unless each page: logs no console error, makes no request beyond its own file,
// and shows every chart it should. Saves a screenshot of each page beside it (*.png).
// Usage: node html_check.mjs PAGE.html:chart1,chart2 ...
import { chromium } from "playwright-core";
import path from "node:path";

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let failed = false;
for (const arg of process.argv.slice(2)) {
  const [file, charts] = arg.split(":");
  const url = "file://" + path.resolve(file);
  const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("request", (r) => { if (r.url() !== url && !r.url().startsWith("data:")) problems.push(`request leaving the file: ${r.url()}`); });
  await page.goto(url, { waitUntil: "load" });
  for (const c of charts ? charts.split(",") : []) {
    const n = await page.locator(`figure[data-chart="${c}"] svg, figure[data-chart="${c}"] [data-empty]`).count();
    if (n !== 1) problems.push(`chart ${c}: ${n} drawn`);
  }
  const shot = file.replace(/\.html$/, ".png");
  await page.screenshot({ path: shot, fullPage: true });
  if (problems.length) { failed = true; console.log(`FAIL ${file}\n  ${problems.join("\n  ")}`); }
  else console.log(`ok   ${file} (screenshot ${shot})`);
  await page.close();
}
await browser.close();
process.exit(failed ? 1 : 0);
