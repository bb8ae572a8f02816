-- Users, their credentials and workspaces (docs/security.md; master/auth/accounts.h).
-- Passwords are stored as libsodium crypto_pwhash_str strings (argon2id, salt and cost inside);
-- tokens (sessions and API tokens) as the SHA-256 of the token, never in clear.
CREATE TABLE users (
  id              BIGSERIAL PRIMARY KEY,
  username        TEXT NOT NULL UNIQUE,
  password_hash   TEXT NOT NULL,
  role            TEXT NOT NULL CHECK (role IN ('admin', 'user', 'viewer')),
  active          BOOLEAN NOT NULL DEFAULT true,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- kind 'session': made by a login (the CLI's and the dashboard's), ended by logout or expiry.
-- kind 'api': long-lived, named, made with `sf token create` for CI, revoked by hand.
CREATE TABLE auth_tokens (
  id              BIGSERIAL PRIMARY KEY,
  user_id         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  kind            TEXT NOT NULL CHECK (kind IN ('session', 'api')),
  name            TEXT NOT NULL DEFAULT '',
  token_sha256    TEXT NOT NULL UNIQUE,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  expires_at      TIMESTAMPTZ,
  last_used_at    TIMESTAMPTZ,
  revoked_at      TIMESTAMPTZ
);
CREATE INDEX auth_tokens_user_idx ON auth_tokens (user_id, kind);

-- Experiments belong to a workspace; members of a workspace share control of its experiments
-- by their role there ('viewer', 'editor': acts on every experiment of the workspace, 'admin':
-- editor who also manages the members). Workspace 1, 'Uncategorized', has no members: every
-- user may create experiments in it and acts on their own only.
CREATE TABLE workspaces (
  id              BIGSERIAL PRIMARY KEY,
  name            TEXT NOT NULL UNIQUE,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO workspaces (id, name) VALUES (1, 'Uncategorized');
SELECT setval('workspaces_id_seq', 1);

CREATE TABLE workspace_members (
  workspace_id    BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  user_id         BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  role            TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
  PRIMARY KEY (workspace_id, user_id)
);

ALTER TABLE experiments ADD COLUMN workspace_id BIGINT NOT NULL DEFAULT 1 REFERENCES workspaces(id);

-- Agents an admin has revoked (`sf agent revoke ID`): refused at AgentLink even with the join
-- token, and a connected one is disconnected, until `sf agent restore ID`.
CREATE TABLE revoked_agents (
  agent_id        TEXT PRIMARY KEY,
  revoked_by      TEXT NOT NULL,
  revoked_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
