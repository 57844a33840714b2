/** A component that re-renders only when `same` says its props changed (Preact's memo lives in preact/compat, which this UI does not load). */
import { Component, h, type ComponentType, type FunctionComponent } from 'preact';

export function memo<P extends object>(render: FunctionComponent<P>, same: (before: P, after: P) => boolean): ComponentType<P> {
  return class Memo extends Component<P> {
    override shouldComponentUpdate(next: P): boolean {
      return !same(this.props as P, next);
    }
    override render(props: P) {
      return h(render, props);
    }
  };
}
