import basicRun from "./fixtures/basic_run.json";
import catalogueRest from "./fixtures/catalogue_rest.json";
import failedRecoverable from "./fixtures/failed_recoverable.json";
import maxSteps from "./fixtures/max_steps.json";
import permissionResume from "./fixtures/permission_resume.json";
import processNested from "./fixtures/process_nested.json";

export type Envelope = Record<string, unknown> & { eventType: string; seq?: number; data: Record<string, unknown> };

const RECORDED = {
  basic_run: basicRun,
  permission_resume: permissionResume,
  failed_recoverable: failedRecoverable,
  process_nested: processNested,
  max_steps: maxSteps,
  catalogue_rest: catalogueRest,
};

export const FIXTURES = Object.keys(RECORDED) as (keyof typeof RECORDED)[];

/** A fresh deep copy of a recorded stream (tests may freeze or edit what they get). */
export function fixture(name: keyof typeof RECORDED): Envelope[] {
  return structuredClone(RECORDED[name]) as Envelope[];
}

/** A made-up envelope for one-off cases. */
export function envelope(
  eventType: string,
  seq: number | undefined,
  data: Record<string, unknown>,
  requestId = "r_test",
): Envelope {
  const out: Envelope = { eventType, requestId, data, timestamp: "2026-07-24T10:00:00.000Z" };
  if (seq !== undefined) out.seq = seq;
  return out;
}
