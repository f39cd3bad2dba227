import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    environment: "jsdom",
    setupFiles: ["test/page-setup.ts"],
    // A safety timeout against hangs, not a speed check: long-answer tests take seconds on a
    // shared, busy machine.
    testTimeout: 60_000,
  },
});
