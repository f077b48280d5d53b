// Benchmark client driver on the official TypeScript SDK (@agentclientprotocol/sdk 2.4.0, public API).
// Usage: node ts_client.mjs ROUND_TRIPS WARMUP UPDATES AGENT_ARGV...   (protocol: see _shared.py)
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { readFileSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";

const [rtArg, warmArg, updArg, ...agentArgv] = process.argv.slice(2);
const roundTrips = Number(rtArg), warmup = Number(warmArg), updates = Number(updArg);
const WARM_UPDATES = 100;

function status(pid) {
  const out = {};
  try {
    for (const line of readFileSync(`/proc/${pid}/status`, "utf8").split("\n")) {
      const m = /^(VmHWM|VmRSS):\s+(\d+)/.exec(line);
      if (m) out[m[1]] = Number(m[2]);
    }
  } catch {}
  return out;
}

// User + system CPU seconds of a process (all threads), from /proc/<pid>/stat (clock ticks of 1/100 s).
function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}
const cpuClock = (pid) => {
  const a0 = cpuSeconds(pid), s0 = cpuSeconds(process.pid);
  return () => [cpuSeconds(pid) - a0, cpuSeconds(process.pid) - s0];
};

const cwd = realpathSync(mkdtempSync(join(tmpdir(), "acp-bench-")));
const t0 = performance.now();
const child = spawn(agentArgv[0], agentArgv.slice(1), { cwd, stdio: ["pipe", "pipe", "inherit"] });
child.on("error", (e) => { console.error(`cannot start the agent: ${e}`); process.exit(2); });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

let received = 0;
let waitingFor = -1;
let reached = null;
const result = await acp
  .client({ name: "acp-bench" })
  .onNotification(acp.methods.client.session.update, () => {
    received++;
    if (received === waitingFor && reached) reached();
  })
  .connectWith(stream, async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "acp-bench", version: "0" },
    });
    const initMs = performance.now() - t0;
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    const prompt = (text) => ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    // The response may overtake the last notification handlers: stop the clock when both are done.
    const turn = async (n) => {
      received = 0;
      waitingFor = n;
      const all = n === 0 ? Promise.resolve() : new Promise((r) => { reached = r; });
      const [resp] = await Promise.all([prompt(`bench:updates ${n}`), all]);
      reached = null;
      return resp;
    };
    for (let i = 0; i < warmup; i++) await prompt("ping");
    await turn(WARM_UPDATES);
    let cpu = cpuClock(child.pid);
    let t = performance.now();
    const resp = await turn(updates);
    const updSeconds = (performance.now() - t) / 1e3;
    const cpuUpd = cpu();
    if (resp.stopReason !== "end_turn") throw new Error(`the long turn ended ${resp.stopReason}`);
    const mem = status(child.pid);
    const got = received;
    cpu = cpuClock(child.pid);
    t = performance.now();
    for (let i = 0; i < roundTrips; i++) await prompt("ping");
    const rtSeconds = (performance.now() - t) / 1e3;
    const cpuRt = cpu();
    return { initMs, rtSeconds, updSeconds, mem, got, cpuRt, cpuUpd };
  });

const exited = new Promise((r) => child.once("exit", r));
child.stdin.end();
const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
await exited;
clearTimeout(timer);
rmSync(cwd, { recursive: true, force: true });
const self = status(process.pid);
process.stdout.write(JSON.stringify({
  init_ms: result.initMs,
  round_trips: roundTrips,
  rt_seconds: result.rtSeconds,
  updates,
  updates_received: result.got,
  upd_seconds: result.updSeconds,
  agent_pid: child.pid,
  agent_vmhwm_kib: result.mem.VmHWM ?? null,
  agent_vmrss_kib: result.mem.VmRSS ?? null,
  driver_vmhwm_kib: self.VmHWM ?? null,
  agent_cpu_rt_s: result.cpuRt[0],
  client_cpu_rt_s: result.cpuRt[1],
  agent_cpu_upd_s: result.cpuUpd[0],
  client_cpu_upd_s: result.cpuUpd[1],
}) + "\n");
process.exit(0);
