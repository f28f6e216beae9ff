/**
 * A job's dependency graph: its parents (Job.dependsOn) above it and its direct children
 * (GetJob's `dependents`) below, laid out by dagre and drawn by @xyflow/react. Clicking a
 * node, or Enter or Space on a focused one, opens that job (the same links are also listed
 * as text beside the graph). Only the parent and child nodes are tab stops, each a link: the
 * node of this job opens nothing, so it is not one, and an edge says nothing the nodes and
 * that list do not (xyflow makes each one focusable by default: a Tab stop per dependency).
 * Loaded lazily: only the job page needs these libraries.
 */
import dagre from '@dagrejs/dagre';
import { ReactFlow, type Edge, type Node } from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import { useMemo, type KeyboardEvent } from 'react';
import { useNavigate } from 'react-router';
import { useTheme } from './theme';

const WIDTH = 300;
const HEIGHT = 44;
/** What a screen reader says of a focused node (xyflow's default speaks of selecting and deleting it). */
const OPEN_HINT = 'Press Enter or Space to open this job.';

export default function DepGraph({ id, parents, children }: { id: string; parents: readonly string[]; children: readonly string[] }) {
  const navigate = useNavigate();
  const theme = useTheme();
  const { nodes, edges } = useMemo(() => layout(id, parents, children), [id, parents, children]);
  const open = (node: string) => {
    if (node !== id) void navigate(`/jobs/${node}`);
  };
  // xyflow's own Enter/Space on a node only selects it: open the job as a click does. Space
  // would otherwise also scroll the page.
  const onKeyDown = (event: KeyboardEvent<HTMLDivElement>) => {
    if (event.key !== 'Enter' && event.key !== ' ') return;
    const target = event.target;
    if (!(target instanceof HTMLElement) || !target.classList.contains('react-flow__node') || !target.dataset.id) return;
    event.preventDefault();
    open(target.dataset.id);
  };
  return (
    <div className="graph" data-testid="job-graph" onKeyDown={onKeyDown}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        colorMode={theme}
        fitView
        nodesDraggable={false}
        nodesConnectable={false}
        edgesFocusable={false}
        proOptions={{ hideAttribution: true }}
        ariaLabelConfig={{ 'node.a11yDescription.default': OPEN_HINT, 'node.a11yDescription.keyboardDisabled': OPEN_HINT }}
        onNodeClick={(_event, node) => open(node.id)}
      />
    </div>
  );
}

function layout(id: string, parents: readonly string[], children: readonly string[]): { nodes: Node[]; edges: Edge[] } {
  const graph = new dagre.graphlib.Graph();
  graph.setGraph({ rankdir: 'TB', nodesep: 24, ranksep: 48 });
  graph.setDefaultEdgeLabel(() => ({}));
  const role = new Map<string, 'self' | 'parent' | 'child'>([[id, 'self']]);
  for (const parent of parents) role.set(parent, 'parent');
  for (const child of children) role.set(child, 'child');
  for (const node of role.keys()) graph.setNode(node, { width: WIDTH, height: HEIGHT });
  const edges: Edge[] = [];
  for (const parent of parents) {
    graph.setEdge(parent, id);
    edges.push({ id: `${parent}->${id}`, source: parent, target: id });
  }
  for (const child of children) {
    graph.setEdge(id, child);
    edges.push({ id: `${id}->${child}`, source: id, target: child });
  }
  dagre.layout(graph);
  const nodes: Node[] = [...role].map(([node, kind]) => {
    const { x, y } = graph.node(node);
    const self = kind === 'self';
    return {
      id: node,
      position: { x: x - WIDTH / 2, y: y - HEIGHT / 2 },
      data: { label: self ? `this job ${node.slice(0, 8)}…` : `${kind} ${node}` },
      className: `graph-node graph-${kind}`,
      style: { width: WIDTH },
      ariaLabel: self ? `this job ${node}` : `${kind} job ${node}`,
      // This job's node opens nothing: no Tab stop, and not described as opening a job. The
      // others are links (without xyflow's aria-roledescription "node", which a screen
      // reader would say instead of "link").
      ...(self
        ? { focusable: false, domAttributes: { 'aria-describedby': undefined } }
        : { ariaRole: 'link' as const, domAttributes: { 'aria-roledescription': undefined } }),
    };
  });
  return { nodes, edges };
}
