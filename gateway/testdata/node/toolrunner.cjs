// The Anthropic TypeScript SDK's toolRunner against the gateway: one tool,
// run until the model stops calling it. Prints the final message as JSON.
// Environment: SDK_DIR (where scripts/install-node-sdks.sh installed the
// SDK), GATEWAY_URL, GATEWAY_KEY.
const sdk = process.env.SDK_DIR + '/node_modules/@anthropic-ai/sdk';
const Anthropic = require(sdk).default;
const { betaTool } = require(sdk + '/helpers/beta/json-schema');

async function main() {
  const client = new Anthropic({ baseURL: process.env.GATEWAY_URL, apiKey: process.env.GATEWAY_KEY, maxRetries: 0 });
  const weather = betaTool({
    name: 'get_weather',
    description: 'The weather in a city',
    inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    run: async ({ city }) => `18C and sunny in ${city}`,
  });
  const final = await client.beta.messages.toolRunner({
    model: 'claude-sonnet-4-6',
    max_tokens: 200,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: [weather],
  });
  process.stdout.write(JSON.stringify(final));
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
  process.exit(1);
});
