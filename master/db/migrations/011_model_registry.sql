-- The model registry (docs/registry.md; master/db/model_store.h): named models whose numbered
-- versions are checkpoints. A checkpoint that is a model version is never deleted: retention
-- skips it, explicit deletion and experiment deletion refuse it, and the foreign key below
-- refuses to drop its row.
CREATE TABLE models (
  id              BIGSERIAL PRIMARY KEY,
  name            TEXT NOT NULL UNIQUE,
  description     TEXT NOT NULL DEFAULT '',
  labels          TEXT[] NOT NULL DEFAULT '{}',
  owner           TEXT NOT NULL DEFAULT '',
  workspace_id    BIGINT NOT NULL DEFAULT 1 REFERENCES workspaces(id),
  archived        BOOLEAN NOT NULL DEFAULT false,
  -- The highest version number ever given (numbers are never reused); bumped, under the model
  -- row's lock, in the transaction that inserts the version.
  last_version    INT NOT NULL DEFAULT 0,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX models_labels_idx ON models USING GIN (labels);

CREATE TABLE model_versions (
  model_id        BIGINT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
  version         INT NOT NULL CHECK (version > 0),
  checkpoint_uuid TEXT NOT NULL REFERENCES checkpoints(uuid),
  notes           TEXT NOT NULL DEFAULT '',
  creator         TEXT NOT NULL DEFAULT '',
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (model_id, version)
);
CREATE INDEX model_versions_checkpoint_idx ON model_versions (checkpoint_uuid);
