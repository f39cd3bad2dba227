/** The session tree of an imported run with two tool calls, as `GET …/sessions/tree` returns it. */
export const IMPORTED_TREE = {
  sessionId: "s_hist",
  lastSeq: 7,
  entries: [
    { entryId: "e_other", role: "user", requestId: "r_other", message: { role: "user", content: "not this run" } },
    { entryId: "e1", role: "user", requestId: "r_hist", message: { role: "user", content: "profile sales.csv" } },
    {
      entryId: "e2",
      role: "assistant",
      requestId: "r_hist",
      status: "complete",
      message: { role: "assistant", content: "" },
      toolCalls: [
        {
          toolCallId: "call_a",
          toolName: "run_skill",
          status: "completed",
          arguments: '{"name": "profile_data"}',
          durationMs: 1830,
          process: [
            { type: "process", operationId: "op_1", stage: "load", status: "running", percent: 25, toolCallId: "call_a" },
            { type: "process", operationId: "op_1", stage: "profile", status: "completed", percent: 100, toolCallId: "call_a" },
          ],
        },
        { toolCallId: "call_b", toolName: "read_file", status: "failed", arguments: '{"path": "gone.txt"}', errorMessage: "no such file: gone.txt" },
      ],
    },
    { entryId: "e3", role: "tool", requestId: "r_hist", message: { role: "tool", content: "40 rows, 4 columns", tool_call_id: "call_a" } },
    { entryId: "e4", role: "tool", requestId: "r_hist", message: { role: "tool", content: "Error", tool_call_id: "call_b" } },
    { entryId: "e5", role: "assistant", requestId: "r_hist", status: "complete", message: { role: "assistant", content: "Sales has **40** rows." } },
  ],
};
