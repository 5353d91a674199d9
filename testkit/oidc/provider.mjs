// A real OpenID Provider for redrive's single sign-on tests: panva's `oidc-provider` on
// loopback, with its development login and consent pages (any password is accepted).
//
//   node provider.mjs PORT REDIRECT_URI [REDIRECT_URI ...]
//
// Issuer http://127.0.0.1:PORT; one confidential client `redrive` (secret
// `redrive-test-secret`, client_secret_basic, authorization code + PKCE) allowed to redirect to
// the given URIs; a fresh RSA signing key per run (RS256). Accounts, by login name: `alice`
// (groups redrive-admins, oncall), `bob` (oncall), `carol` (contractors, which redrive's test
// configuration maps to nothing); any other login is an account without groups. The groups
// travel in the ID token's `groups` claim (scope `groups`). Prints `listening on ISSUER` once
// it serves; stops on SIGTERM or SIGINT.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import Provider from 'oidc-provider';

const [portArg, ...redirectUris] = process.argv.slice(2);
const port = Number(portArg);
if (!Number.isInteger(port) || port <= 0 || redirectUris.length === 0) {
  console.error('usage: node provider.mjs PORT REDIRECT_URI [REDIRECT_URI ...]');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

const GROUPS = {
  alice: ['redrive-admins', 'oncall'],
  bob: ['oncall'],
  carol: ['contractors'],
};

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key-1', use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'redrive',
      client_secret: 'redrive-test-secret',
      redirect_uris: redirectUris,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          email: `${id}@example.test`,
          email_verified: true,
          groups: GROUPS[id] ?? [],
        };
      },
    };
  },
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'name'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  // Put the scope-requested claims in the ID token itself (redrive reads the ID token only).
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => true },
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
});
provider.on('server_error', (ctx, err) => console.error('server_error', err));

const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`listening on ${issuer}`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
