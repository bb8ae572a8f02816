// A user-code experiment's context as the dashboard shows it (GET /experiments/{id}/context): each
// file's line, the archive's digest cut short, the first files of a long list, and the archive
// saved as a .tar.gz from the base64 the master sends (protobuf JSON's bytes).
//
// Failure model: decodeBase64 throws on text that is not base64 (atob's DOMException); the caller
// (the Download button) shows that as the download's error. Nothing else here throws.
import type { ContextFile } from '../api/types';

/** Files listed before "show all N" is offered. */
export const CONTEXT_FILES_SHOWN = 200;
/** Hex digits of the SHA-256 shown; the full digest is the tooltip. */
export const DIGEST_SHOWN = 12;

/** "train.py", or "data → /mnt/shared/data" for a symbolic link. */
export function contextFileLabel(f: ContextFile): string {
  return f.linkTarget ? `${f.path} → ${f.linkTarget}` : f.path;
}

/** The first DIGEST_SHOWN hex digits and an ellipsis; a shorter text as it is. */
export function shortDigest(sha256: string): string {
  return sha256.length > DIGEST_SHOWN ? `${sha256.slice(0, DIGEST_SHOWN)}…` : sha256;
}

/** The files to list: all of them, or the first CONTEXT_FILES_SHOWN. */
export function shownFiles(files: readonly ContextFile[], showAll: boolean): readonly ContextFile[] {
  return showAll ? files : files.slice(0, CONTEXT_FILES_SHOWN);
}

/** The bytes of a base64 text (standard alphabet, padded, as protobuf JSON writes bytes; the
 *  URL-safe alphabet is accepted too, as protobuf's parsers do). */
export function decodeBase64(b64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64.replace(/-/g, '+').replace(/_/g, '/').replace(/\s+/g, ''));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The name the archive is saved under. */
export const contextArchiveName = (experimentId: number) => `experiment-${experimentId}-context.tar.gz`;

/** The archive as a gzip Blob. */
export function contextArchiveBlob(archiveBase64: string): Blob {
  return new Blob([decodeBase64(archiveBase64)], { type: 'application/gzip' });
}

/** Hands `blob` to the browser as a download named `name` (an object URL on a temporary link,
 *  revoked once the click has been handled). */
export function saveBlob(blob: Blob, name: string): void {
  const href = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  a.rel = 'noopener';
  a.style.display = 'none';
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 0);
}
