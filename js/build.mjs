// Bundles the anywidget modules, ../neta_jupyter/static/widget.js (+ widget.css) and crew_board.js,
// and the side panel's code, lib/lab.js (+ lab.css), which `jupyter labextension build` then
// turns into the prebuilt JupyterLab extension (package.json: `jupyterlab.outputDir`). JupyterLab's
// own packages stay imports in lib/lab.js: the page shares its copies of them with the extension.
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const watch = process.argv.includes("--watch");

/** @type {import("esbuild").BuildOptions} */
const common = {
  absWorkingDir: here,
  bundle: true,
  format: "esm",
  target: ["es2020"],
  minify: !watch,
  sourcemap: false,
  legalComments: "eof",
  logLevel: "info",
};

/** @type {import("esbuild").BuildOptions[]} */
const builds = [
  { ...common, entryPoints: { widget: "src/index.ts", crew_board: "src/crew-board.ts" }, outdir: "../neta_jupyter/static" },
  { ...common, entryPoints: { lab: "src/lab/index.ts" }, outdir: "lib", external: ["@jupyterlab/*", "@lumino/*"] },
];

if (watch) {
  for (const options of builds) await (await esbuild.context(options)).watch();
} else {
  await Promise.all(builds.map((options) => esbuild.build(options)));
}
