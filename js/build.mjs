// Bundles the anywidget module: ../neta_jupyter/static/widget.js (+ widget.css).
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const watch = process.argv.includes("--watch");

/** @type {import("esbuild").BuildOptions} */
const options = {
  absWorkingDir: here,
  entryPoints: { widget: "src/index.ts" },
  outdir: "../neta_jupyter/static",
  bundle: true,
  format: "esm",
  target: ["es2020"],
  minify: !watch,
  sourcemap: false,
  legalComments: "eof",
  logLevel: "info",
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
