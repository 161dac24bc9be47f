// The README's example: open a session with a policy, stream events in, read
// the compacted context, search the archive. Run by test/client.test.ts.
import { Role, SidecarClient, policy, strategies, triggers } from "../src/index.js";

export async function quickstart(address: string): Promise<string[]> {
  const client = new SidecarClient({ address, timeoutMs: 10_000 });
  await client.createSession("agent-42", {
    policy: policy(strategies.slidingWindow(4), { trigger: triggers.turnCount(3) }),
  });
  const session = client.session("agent-42");
  const stream = session.stream();
  for (const n of [1, 2, 3, 4]) {
    await stream.send([{ role: Role.USER, text: `check disk ${n}` }, { role: Role.ASSISTANT, text: `disk ${n} ok` }]);
  }
  stream.close();
  for await (const message of stream) if (message.kind === "error") throw message.error;
  const { events } = await session.context(); // what to send to the model next
  for await (const hit of session.search("disk")) console.log("archived:", hit.event?.text);
  client.close();
  return events.map((e) => e.text);
}
