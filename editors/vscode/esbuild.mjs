// Bundles the extension into out/extension.js (`vscode` stays external: VS Code provides it).
// --production: minified, no source maps (what the .vsix ships); --watch: rebuild on change;
// --tests: bundles test/*.test.ts into out/test/ for `node --test`.
import { readdirSync } from "node:fs";
import * as esbuild from "esbuild";

const args = new Set(process.argv.slice(2));
const production = args.has("--production");

const common = {
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  logLevel: "warning",
};

if (args.has("--tests")) {
  const entryPoints = readdirSync("test")
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => `test/${f}`);
  await esbuild.build({ ...common, entryPoints, outdir: "out/test", sourcemap: "inline" });
} else {
  const options = {
    ...common,
    entryPoints: ["src/extension.ts"],
    outfile: "out/extension.js",
    external: ["vscode"],
    minify: production,
    sourcemap: !production,
    sourcesContent: false,
  };
  if (args.has("--watch")) {
    const context = await esbuild.context(options);
    await context.watch();
  } else {
    await esbuild.build(options);
  }
}
