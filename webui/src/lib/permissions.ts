// What the logged-in user may do, mirrored from the master's policy (docs/security.md) so that the
// dashboard does not offer buttons that can only fail. The master decides regardless: a 403 from
// it is still shown as it comes.
//
//   viewer: reads everything, acts on nothing.
//   user:   creates experiments; acts on their own, and on those of workspaces where they are an
//           editor or admin.
//   admin:  acts on everything; sees users and the audit log.
import type { Experiment, Serving, Task, Whoami } from '../api/types';

/** Who is asking. `undefined` means the master does not authenticate (no /auth routes) or could
 *  not say who we are: then nothing is hidden and the master's answers decide. */
export type Viewer = Whoami | undefined;

export interface Permission {
  ok: boolean;
  /** Why not, in one sentence, for a tooltip; '' when allowed. */
  reason: string;
}

const ALLOWED: Permission = { ok: true, reason: '' };

/** Why a user (not an admin, not a viewer) may not act on something with this owner and
 *  workspace ("belongs to alice in workspace nlp, where you are a viewer"), or undefined when they
 *  may: it is theirs, or in a workspace where they are an editor or admin. */
function notYours(me: Whoami, owner: string, workspace: string): string | undefined {
  if (owner && owner === me.username) return undefined;
  const ws = workspace ? me.workspaces.find((w) => w.name === workspace) : undefined;
  if (ws && (ws.role === 'editor' || ws.role === 'admin')) return undefined;
  const whose = owner ? `belongs to ${owner}` : 'is not yours';
  const where = workspace ? (ws ? ` in workspace ${workspace}, where you are a viewer` : ` in workspace ${workspace}, of which you are not a member`) : '';
  return `${whose}${where}`;
}

/** May `me` pause, activate, kill, archive (and the like) experiment `e`? */
export function canActOn(me: Viewer, e: Pick<Experiment, 'id' | 'owner' | 'workspace'>): Permission {
  if (!me || me.role === 'admin') return ALLOWED;
  if (me.role === 'viewer') return { ok: false, reason: `Your role is viewer: you can look at experiments but not change them.` };
  const why = notYours(me, e.owner, e.workspace);
  if (!why) return ALLOWED;
  return { ok: false, reason: `Experiment ${e.id} ${why}: you can act only on your own experiments and on those of workspaces where you are an editor or admin.` };
}

/** What a task is called in a reason: by its kind (a kind added later is a "task"). */
const TASK_NOUNS: Record<string, [string, string]> = { SERVER: ['server', 'servers'], COMMAND: ['command', 'commands'], NOTEBOOK: ['notebook', 'notebooks'], SHELL: ['shell', 'shells'] };

/** May `me` kill task `t` (a command, a server, a kind added later)? The master asks what acting
 *  on the task asks: its owner, an editor or admin of its workspace, or an admin (the same rule as
 *  for experiments). `verb` names the action in the reason ("kill"; "stop" for a server's Stop). */
export function canActOnTask(me: Viewer, t: Pick<Task, 'id' | 'owner' | 'workspace'> & { kind?: string }, verb = 'kill'): Permission {
  if (!me || me.role === 'admin') return ALLOWED;
  const [noun, nouns] = TASK_NOUNS[t.kind ?? ''] ?? ['task', 'tasks'];
  if (me.role === 'viewer') return { ok: false, reason: `Your role is viewer: you can look at ${nouns} but not ${verb} them.` };
  const why = notYours(me, t.owner, t.workspace);
  if (!why) return ALLOWED;
  const Noun = noun.charAt(0).toUpperCase() + noun.slice(1);
  return { ok: false, reason: `${Noun} ${t.id} ${why}: you can ${verb} only your own ${nouns} and those of workspaces where you are an editor or admin.` };
}

/** May `me` stop server `s`? A server is a task: the rule of canActOnTask. */
export function canStopServing(me: Viewer, s: Pick<Serving, 'id' | 'owner' | 'workspace'>): Permission {
  return canActOnTask(me, { ...s, kind: 'SERVER' }, 'stop');
}

/** May `me` create (submit, fork, continue) experiments, or start servers? */
export function canCreate(me: Viewer): Permission {
  if (me?.role === 'viewer') return { ok: false, reason: 'Your role is viewer: you cannot create experiments or start servers.' };
  return ALLOWED;
}

/** Admin-only pages: users and the audit log. */
export function isAdmin(me: Viewer): boolean {
  return me?.role === 'admin';
}

/** The experiments among `rows` that `me` may act on: what a bulk action may be offered over. */
export function actionable<E extends Pick<Experiment, 'id' | 'owner' | 'workspace'>>(me: Viewer, rows: E[]): E[] {
  return rows.filter((e) => canActOn(me, e).ok);
}
