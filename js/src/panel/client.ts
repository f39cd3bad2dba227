/** What the panel asks the run API besides following runs: the run list, the models, a new run. */
import { RunApi, queryPath, type ActionBodies } from "../api";
import { postJson, type Fetch, type PageConfig } from "../transport";
import { isRecord, str, strList } from "../wire";
import { parseRuns, type RunRow } from "./runs";

export interface Models {
  readonly default: string;
  readonly models: readonly string[];
}

export interface Started {
  readonly requestId: string;
  readonly sessionId: string;
}

export class PanelClient {
  private readonly api: RunApi;

  constructor(
    private readonly config: PageConfig,
    private readonly fetchImpl: Fetch = (url, init) => fetch(url, init),
  ) {
    this.api = new RunApi((route, body) => postJson(this.fetchImpl, config, route, body));
  }

  async runs(): Promise<RunRow[]> {
    return parseRuns(await this.get(queryPath("runs", {})));
  }

  async models(): Promise<Models> {
    const body = await this.get(queryPath("models", {}));
    return { default: str(body["default"]) ?? "", models: strList(body["models"]) };
  }

  async start(body: ActionBodies["start"]): Promise<Started> {
    const answer = await this.api.start(body);
    const fields = isRecord(answer) ? answer : {};
    const requestId = str(fields["requestId"]);
    if (!requestId) throw new Error("The server did not say which run it started");
    return { requestId, sessionId: str(fields["sessionId"]) ?? "" };
  }

  private async get(path: string): Promise<Record<string, unknown>> {
    const headers: Record<string, string> = this.config.token ? { Authorization: `token ${this.config.token}` } : {};
    let response: Response;
    try {
      response = await this.fetchImpl(`${this.config.baseUrl}neta/api/${path}`, { credentials: "same-origin", headers });
    } catch {
      throw new Error("Could not reach the Jupyter server");
    }
    const body: unknown = await response.json().catch(() => null);
    if (!response.ok || !isRecord(body)) {
      const message = isRecord(body) ? str(body["message"]) : undefined;
      throw new Error(message || `The server refused the request (HTTP ${response.status})`);
    }
    return body;
  }
}
