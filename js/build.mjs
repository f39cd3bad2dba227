// Bundles the anywidget modules: ../neta_jupyter/static/widget.js (+ widget.css), crew_board.js.
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const watch = process.argv.includes("--watch");

/** @type {import("esbuild").BuildOptions} */
const options = {
  absWorkingDir: here,
  entryPoints: { widget: "src/index.ts", crew_board: "src/crew-board.ts" },
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
