// The quickstart's demo upstream: answers every request on 127.0.0.1:8081 with what it received.
import { createServer } from "node:http";

const port = Number(process.env.PORT ?? 8081);
createServer((req, res) => {
  res.writeHead(200, { "content-type": "text/plain" });
  res.end(`Hello from the Sluice quickstart upstream!\n${req.method} ${req.url}\nhost: ${req.headers.host}\n`);
}).listen(port, "127.0.0.1", () => console.error(`demo upstream on http://127.0.0.1:${port}`));
