import { describe, expect, it } from "vitest";
import { ACTIONS, QUERIES, RunApi, queryPath, type ActionName } from "../src/api";

describe("the generated run-API client", () => {
  it("has one method per action, each posting its body to the action's route", async () => {
    const posted: [string, unknown][] = [];
    const api = new RunApi(async (route, body) => {
      posted.push([route, body]);
      return { success: true };
    });
    const names = Object.keys(ACTIONS) as ActionName[];
    for (const name of names) {
      const method = api[name] as (body: unknown) => Promise<unknown>;
      expect(await method.call(api, { marker: name })).toEqual({ success: true });
    }
    expect(posted).toEqual(names.map((name) => [ACTIONS[name].route, { marker: name }]));
    expect(new Set(names.map((name) => ACTIONS[name].route)).size).toBe(names.length);
  });

  it("puts a query's parameters on its route, encoded, leaving out the ones not given", () => {
    expect(queryPath("tree", { sessionId: "s 1/&" })).toBe(`${QUERIES.tree.route}?sessionId=s%201%2F%26`);
    expect(queryPath("runs", {})).toBe(QUERIES.runs.route);
    expect(queryPath("runs", { sessionId: "s_1" })).toBe(`${QUERIES.runs.route}?sessionId=s_1`);
  });
});
