-- Secrets of the cluster, one row per use, created by the first master that needs one. The
-- only one so far: 'task_tokens', the HMAC key that TrialLink's per-task tokens are made with
-- (master/auth/task_tokens.h). Hex text, 32 random bytes.
CREATE TABLE cluster_secrets (
  name            TEXT PRIMARY KEY,
  secret_hex      TEXT NOT NULL,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
