// Bookmark trees (chrome.bookmarks.BookmarkTreeNode) as protocol Bookmark objects. Only
// http(s) bookmarks that pass the capture gate are sent; folders only give their titles
// to `folder`, the '/'-joined path below the root ("Bookmarks bar/Reading").

import { cutTitle } from "./protocol.js";

function bookmark(node, folder, gateFor) {
  const verdict = gateFor(node.url);
  if (!verdict.ok) return null;
  return {
    browser_id: String(node.id),
    parent_id: node.parentId != null ? String(node.parentId) : null,
    index: Number.isInteger(node.index) ? node.index : null,
    url: verdict.url,
    title: cutTitle(node.title),
    folder: folder ? folder.slice(0, 4096) : null,
    added_time: Number.isFinite(node.dateAdded) ? Math.floor(node.dateAdded) : null,
  };
}

function join(folder, title) {
  if (!title) return folder;
  return folder ? `${folder}/${title}` : title;
}

/**
 * Every allowed bookmark under `nodes`. `folder` is the path of the nodes' parent ("" at
 * the root). Returns {bookmarks, skipped}.
 */
export function flattenTree(nodes, gateFor, folder = "") {
  const bookmarks = [];
  let skipped = 0;
  const stack = nodes.map((node) => [node, folder]);
  while (stack.length) {
    const [node, path] = stack.shift();
    if (node.url !== undefined) {
      const item = bookmark(node, path, gateFor);
      if (item) bookmarks.push(item);
      else skipped += 1;
    } else {
      // A folder: the root (no parentId) contributes no title of its own.
      const inner = node.parentId === undefined ? path : join(path, node.title);
      stack.push(...(node.children ?? []).map((child) => [child, inner]));
    }
  }
  return { bookmarks, skipped };
}

/** Folder path from a chain of ancestors, outermost first (as from repeated bookmarks.get). */
export function folderPath(ancestors) {
  return ancestors.filter((node) => node.parentId !== undefined).map((node) => node.title).filter(Boolean).join("/");
}

/** Ids of every url node in a (removed) subtree, the node itself included. */
export function idsUnder(node) {
  if (!node) return [];
  if (node.url !== undefined) return [String(node.id)];
  return (node.children ?? []).flatMap(idsUnder);
}

/** Split a list into arrays of at most `size` (at least one, possibly empty, array). */
export function chunk(list, size) {
  const out = [];
  for (let start = 0; start < list.length; start += size) out.push(list.slice(start, start + size));
  return out.length ? out : [[]];
}

/** bookmark_import request bodies for a whole tree. */
export function importBatches(bookmarks, importId, size) {
  const batches = chunk(bookmarks, size);
  return batches.map((items, batch) => {
    const fields = { import_id: importId, batch, final: batch === batches.length - 1, bookmarks: items };
    if (fields.final) fields.total = bookmarks.length;
    return fields;
  });
}

/**
 * Where a bookmark goes for a folder `path` such as "Research" or "Bookmarks bar/Research"
 * (PROTOCOL.md section 5, `create_bookmark.folder`): the shallowest existing folder whose
 * path ends with it (any case); else the same for its longest leading part that exists,
 * the rest to be created inside; else new folders in "Other bookmarks". Returns
 * {parentId, path, missing}: `missing` are the titles of the folders still to create
 * under `parentId`, outermost first.
 */
export function resolveFolder(tree, path) {
  const wanted = String(path).split("/").map((part) => part.trim()).filter(Boolean);
  const roots = tree[0]?.children ?? [];
  const folders = [];
  const queue = roots.filter((node) => node.url === undefined).map((node) => [node, [node.title]]);
  while (queue.length) {
    const [node, titles] = queue.shift();
    folders.push({ node, titles });
    for (const child of node.children ?? []) {
      if (child.url === undefined) queue.push([child, [...titles, child.title]]);
    }
  }
  const same = (a, b) => String(a).toLocaleLowerCase() === String(b).toLocaleLowerCase();
  for (let size = wanted.length; size > 0; size -= 1) {
    const part = wanted.slice(0, size);
    const found = folders.find(({ titles }) => titles.length >= size && part.every((title, i) => same(titles[titles.length - size + i], title)));
    if (found) return { parentId: String(found.node.id), path: found.titles.join("/"), missing: wanted.slice(size) };
  }
  const other = roots.find((root) => root.folderType === "other") ?? roots[1] ?? roots[0];
  return { parentId: String(other?.id ?? "2"), path: other?.title ?? "", missing: wanted };
}
