// `sf-trainer cluster`: a trainer started by an agent for one rank of one trial.
//
// The trial spec comes from the environment the agent sets (SF_MASTER_ADDRESS, SF_TRIAL_ID,
// SF_RANK, SF_WORLD_SIZE, SF_TASK_ID, SF_RESTART, SF_CONFIG_FILE, SF_HPARAMS,
// SF_CHECKPOINT_DIR, SF_RESTORE_CHECKPOINT). It trains on the experiment's data with the same
// TextRun as `sf-trainer train` (text_run.h). It talks TrialLink to the master: asks
// for its next searcher operation, trains to its length reporting training metrics every
// scheduling_unit batches, validates (also every min_validation_period), checkpoints (min_checkpoint_period and at the end of
// each operation), reports each checkpoint, and checks between steps whether to stop (pause:
// checkpoint and exit 0; kill: exit at once). Calls that fail because the master is away are
// retried for up to five minutes, so a master restart doesn't end the trial.
//
// Exit codes: 0 the trial is done or was told to stop; 1 a training error; 2 a bad spec
// (config, hyperparameters, checkpoint).
#pragma once

namespace sf {

int RunClusterTrial();

}  // namespace sf
