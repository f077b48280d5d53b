// Benchmark agent on the official TypeScript SDK (@agentclientprotocol/sdk 2.4.0, public API only).
// "bench:updates N" -> N agent_message_chunk updates, then end_turn; anything else -> end_turn.
// Protocol shared by all benchmark peers: see _shared.py.
import * as acp from "@agentclientprotocol/sdk";
import { randomBytes } from "node:crypto";
import { Readable, Writable } from "node:stream";

const chunkText = (i) => `chunk ${String(i).padStart(5, "0")} of the streamed reply `;
const wanted = (text) => {
  const m = /bench:updates (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
};
let messages = 0;

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
acp
  .agent({ name: "bench-ts-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: "bench-ts-agent", version: "0" },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: `sess_${randomBytes(8).toString("hex")}` }))
  .onRequest(acp.methods.agent.session.prompt, async (ctx) => {
    const { sessionId, prompt } = ctx.params;
    const text = prompt.filter((b) => b.type === "text").map((b) => b.text).join("\n");
    const n = wanted(text);
    if (n) {
      const messageId = `${sessionId}-agent-${++messages}`;
      for (let i = 0; i < n; i++) {
        if (ctx.signal.aborted) return { stopReason: "cancelled" };
        await ctx.client.notify(acp.methods.client.session.update, {
          sessionId,
          update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: chunkText(i) }, messageId },
        });
      }
    }
    return { stopReason: "end_turn" };
  })
  .onNotification(acp.methods.agent.session.cancel, () => {})
  .connect(stream);
