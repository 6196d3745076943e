// The fake provider of bench/llm.ts in a process of its own, so the load generator does not share its event loop.
// Prints the port it listens on.

import { startFakeProvider } from "../test/helpers/fake-providers.js";

const fake = await startFakeProvider({ name: "bench" });
process.stdout.write(`${fake.port}\n`);
process.on("SIGTERM", () => void fake.close().then(() => process.exit(0)));
