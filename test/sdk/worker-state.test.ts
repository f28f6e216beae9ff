import { describe, expect, it } from 'vitest';
import { IllegalTransitionError, StateMachine, type Transitions } from '../../src/sdk/worker/state.js';

/** The worker's lifecycles move only along their tables; anything else is an SDK bug and throws. */

type Light = 'red' | 'green' | 'off';
const TABLE: Transitions<Light> = { red: ['green', 'off'], green: ['red', 'off'], off: [] };

function setup() {
  const changes: string[] = [];
  const light = new StateMachine<Light>('light', 'red', TABLE, (from, to) => changes.push(`${from}->${to}`));
  return { light, changes };
}

describe('StateMachine', () => {
  it('moves along its table and reports each change', () => {
    const { light, changes } = setup();
    light.to('green');
    light.to('red');
    light.to('off');
    expect(light.current).toBe('off');
    expect(light.is('off', 'red')).toBe(true);
    expect(changes).toEqual(['red->green', 'green->red', 'red->off']);
  });

  it('refuses a transition its table does not list, and stays where it was', () => {
    const { light, changes } = setup();
    light.to('off');
    expect(() => light.to('green')).toThrow(IllegalTransitionError);
    expect(() => light.to('off')).toThrow(/light: illegal transition off -> off/);
    expect(light.current).toBe('off');
    expect(changes).toEqual(['red->off']);
  });
});
