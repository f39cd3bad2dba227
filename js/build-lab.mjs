// The prebuilt JupyterLab extension (the side panel) from lib/lab.js, which build.mjs bundles:
// JupyterLab's builder, given the core's package metadata from @jupyterlab/core-meta (the same as
// the Python package's staging/package.json), so no installed JupyterLab is needed to build it.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";

const here = fileURLToPath(new URL(".", import.meta.url));
const builder = join(here, "node_modules", "@jupyterlab", "builder", "lib", "build-labextension.js");
if (!existsSync(builder) && process.env.CI !== "true") {
  // A checkout whose node_modules predate the panel: the widget is built, the panel is not.
  console.warn("The side panel is not built: JupyterLab's builder is missing (run `npm ci`).");
  process.exit(0);
}
const core = join(here, "lib", "core");
mkdirSync(core, { recursive: true });
copyFileSync(join(here, "node_modules", "@jupyterlab", "core-meta", "core.package.json"), join(core, "package.json"));
const dev = process.argv.includes("--development");
const args = [builder, "--core-path", core, ...(dev ? ["--development"] : []), here];
const result = spawnSync(process.execPath, args, { stdio: "inherit", cwd: here });
process.exit(result.status ?? 1);
