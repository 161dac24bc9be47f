#!/usr/bin/env node
// Fails when src/gen/ is stale: regenerates the code from protos/ (and the
// vendored proto/) into a temporary directory with the committed
// buf.gen.yaml and compares it file by file with src/gen/.
// Run from anywhere: `node clients/typescript/scripts/check-gen.mjs` or `npm run check-gen`.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const root = resolve(pkg, "..", "..");
const committed = join(pkg, "src", "gen");
const buf = join(pkg, "node_modules", ".bin", "buf");
if (!existsSync(buf)) {
  console.error(`check-gen: ${buf} missing: run \`npm ci\` in clients/typescript first`);
  process.exit(2);
}

const scratch = mkdtempSync(join(tmpdir(), "ts-gen-"));
try {
  // The committed template with its output redirected to the scratch directory.
  const template = readFileSync(join(pkg, "buf.gen.yaml"), "utf8").replace(
    /^(\s*out:\s*).*$/m,
    `$1${join(scratch, "gen")}`,
  );
  const templatePath = join(scratch, "buf.gen.yaml");
  writeFileSync(templatePath, template);
  execFileSync(buf, ["generate", "--template", templatePath], { cwd: root, stdio: "inherit" });

  const list = (dir) =>
    existsSync(dir)
      ? readdirSync(dir, { recursive: true, withFileTypes: true })
          .filter((entry) => entry.isFile())
          .map((entry) => relative(dir, join(entry.parentPath ?? entry.path, entry.name)))
          .sort()
      : [];
  const fresh = list(join(scratch, "gen"));
  const ours = list(committed);
  const problems = [];
  for (const file of new Set([...fresh, ...ours])) {
    if (!fresh.includes(file)) problems.push(`${file}: committed but no longer generated`);
    else if (!ours.includes(file)) problems.push(`${file}: generated but not committed`);
    else if (readFileSync(join(scratch, "gen", file), "utf8") !== readFileSync(join(committed, file), "utf8")) {
      problems.push(`${file}: differs from what the protos generate`);
    }
  }
  if (problems.length > 0) {
    console.error("clients/typescript/src/gen is stale:\n  " + problems.join("\n  "));
    console.error("regenerate: npx buf generate --template clients/typescript/buf.gen.yaml (from the repository root)");
    process.exit(1);
  }
  console.log(`clients/typescript/src/gen is up to date (${fresh.length} files)`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
