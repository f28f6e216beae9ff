/**
 * A job's dependency graph: its parents (Job.dependsOn) above it and its direct children
 * (GetJob's `dependents`) below, laid out by dagre and drawn by @xyflow/react. Clicking a
 * node opens that job; the same links are listed as text beside it for keyboard use. Only the
 * nodes (jobs) are tab stops: an edge says nothing the nodes and that list do not, and
 * xyflow makes each one focusable by default (a Tab stop per dependency).
 * Loaded lazily: only the job page needs these libraries.
 */
import dagre from '@dagrejs/dagre';
import { ReactFlow, type Edge, type Node } from '@xyflow/react';
import '@xyflow/react/dist/style.css';
import { useMemo } from 'react';
import { useNavigate } from 'react-router';
import { useTheme } from './theme';

const WIDTH = 300;
const HEIGHT = 44;

export default function DepGraph({ id, parents, children }: { id: string; parents: readonly string[]; children: readonly string[] }) {
  const navigate = useNavigate();
  const theme = useTheme();
  const { nodes, edges } = useMemo(() => layout(id, parents, children), [id, parents, children]);
  return (
    <div className="graph" data-testid="job-graph">
      <ReactFlow
        nodes={nodes}
        edges={edges}
        colorMode={theme}
        fitView
        nodesDraggable={false}
        nodesConnectable={false}
        edgesFocusable={false}
        proOptions={{ hideAttribution: true }}
        onNodeClick={(_event, node) => {
          if (node.id !== id) void navigate(`/jobs/${node.id}`);
        }}
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
    return {
      id: node,
      position: { x: x - WIDTH / 2, y: y - HEIGHT / 2 },
      data: { label: kind === 'self' ? `this job ${node.slice(0, 8)}…` : `${kind} ${node}` },
      className: `graph-node graph-${kind}`,
      style: { width: WIDTH },
      ariaLabel: `${kind} job ${node}`,
    };
  });
  return { nodes, edges };
}
