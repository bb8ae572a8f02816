// Users (admins only, read-only): who may log in, with which role. Changes go through
// `sf user create|deactivate|set-role|set-password`.
import { api } from '../api/client';
import { Empty, ErrorBanner, Skeleton } from '../components/common';
import { formatDateTime } from '../lib/format';
import { usePolling } from '../lib/hooks';
import { isAdmin } from '../lib/permissions';
import { useSession } from '../lib/session';

export function UsersPage() {
  const { me } = useSession();
  const admin = isAdmin(me);
  const users = usePolling((s) => (admin ? api.getUsers(s) : Promise.resolve([])), [admin], 0);
  return (
    <section aria-labelledby="users-h">
      <div className="page-head">
        <h1 id="users-h">Users</h1>
      </div>
      {!admin ? (
        <Empty>Only admins can see the users.</Empty>
      ) : (
        <>
          <p className="muted">
            Create users, change roles and deactivate them with <code>sf user create|set-role|deactivate</code>.
          </p>
          <ErrorBanner error={users.error} onRetry={users.reload} />
          {users.loading && !users.data ? (
            <Skeleton rows={4} />
          ) : users.data && users.data.length === 0 ? (
            <Empty>No users.</Empty>
          ) : users.data ? (
            <div className="table-wrap">
              <table className="table" data-testid="users-table">
                <caption className="sr-only">Users</caption>
                <thead>
                  <tr>
                    <th scope="col">Username</th>
                    <th scope="col">Role</th>
                    <th scope="col">Active</th>
                    <th scope="col">Created</th>
                  </tr>
                </thead>
                <tbody>
                  {users.data.map((u) => (
                    <tr key={u.username} data-testid="user-row">
                      <td className="strong">{u.username}</td>
                      <td>{u.role}</td>
                      <td>{u.active ? 'yes' : 'no (deactivated)'}</td>
                      <td>{formatDateTime(u.createdAt)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          ) : null}
        </>
      )}
    </section>
  );
}
